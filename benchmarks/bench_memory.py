"""Time ``graphtool memory`` against ``graphtool trace``, and on a 7B Llama on meta, in one run.

    python benchmarks/bench_memory.py [--repeat 3] [--skip-7b]

Each command runs in a fresh process; trace and memory alternate (ABBA) so machine noise hits both alike.
Prints a markdown table (median and min wall seconds, peak RSS, the ratio and its target), then the
7B model's saved activations, eager beside compiled, from the memory report itself.

The 7B case is examples/hf_llama.py's config (``LLAMA_SIZE=7b``) at batch 1 and sequence 4096
(``tests/fixtures/memory/llama_seq.py``; examples/hf_llama.py itself runs sequence 8), built and
analysed on the meta device: no weights in memory.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _bench import machine_line

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
ENCODER = str(HERE / "encoder12.py")
LLAMA = str(ROOT / "tests" / "fixtures" / "memory" / "llama_seq.py")
GT = shutil.which("graphtool") or "graphtool"

TRACE = "graphtool trace --format json (encoder12)"
MEMORY = "graphtool memory --format json (encoder12)"
LLAMA_7B = "graphtool memory --device meta --format json (Llama 7B, batch 1, sequence 4096)"

CASES = [
    # (name, command, environment, baseline, target ratio, target seconds, target peak RSS GiB)
    (TRACE, [GT, "trace", ENCODER, "--format", "json"], None, None, None, None, None),
    (MEMORY, [GT, "memory", ENCODER, "--format", "json"], None, TRACE, 1.2, None, None),
    (LLAMA_7B, [GT, "memory", LLAMA, "--device", "meta", "--format", "json"], {"LLAMA_SIZE": "7b", "LLAMA_SEQ": "4096"},
     None, None, 60.0, 2.0),
]


def run_once(cmd: list[str], env: dict | None) -> tuple[float, int, str]:
    """Wall seconds, peak RSS bytes (the child's own ``ru_maxrss``, from ``os.wait4``) and stdout of one
    fresh process; stops the benchmark if it fails."""
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        start = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=out, stderr=err, text=True, env={**os.environ, **(env or {})})
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - start
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        if proc.returncode != 0:
            raise SystemExit(f"{' '.join(cmd[:4])} failed ({proc.returncode}):\n{err.read()[-2000:]}")
        return wall, usage.ru_maxrss * 1024, out.read()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--skip-7b", action="store_true", help="only the encoder12 rows")
    args = parser.parse_args()
    cases = [c for c in CASES if not (args.skip_7b and c[0] == LLAMA_7B)]
    times: dict[str, list[float]] = {c[0]: [] for c in cases}
    rss: dict[str, int] = {}
    last_out: dict[str, str] = {}
    for i in range(args.repeat):
        # ABBA order: trace and memory take turns going first, so a drift in load hits both alike
        order = cases if i % 2 == 0 else [*reversed(cases[:2]), *cases[2:]]
        for name, cmd, env, *_ in order:
            if name == LLAMA_7B and i > 0:
                continue  # once: it is judged against absolute targets
            wall, peak, out = run_once(cmd, env)
            times[name].append(wall)
            rss[name] = peak
            last_out[name] = out
            print(f"[{i + 1}/{args.repeat}] {name}: {wall:.2f}s", file=sys.stderr)
    print(f"\n{machine_line(args.repeat)}\n")
    print("| command | median s | min s | peak RSS | vs | ratio | target |")
    print("|---|---:|---:|---:|---|---:|---:|")
    for name, _, _, base, ratio_target, seconds_target, rss_target in cases:
        med = statistics.median(times[name])
        head = f"| {name} | {med:.2f} | {min(times[name]):.2f} | {rss[name] / 2**20:.0f} MiB |"
        if base:
            ratio = med / statistics.median(times[base])
            ok = "ok" if ratio <= ratio_target else "OVER"
            print(f"{head} {base.split(' (')[0]} | {ratio:.2f}x | <= {ratio_target}x {ok} |")
        elif seconds_target:
            ok = "ok" if med < seconds_target and rss[name] < rss_target * 2**30 else "OVER"
            print(f"{head} | | < {seconds_target:.0f} s, < {rss_target:.0f} GiB {ok} |")
        else:
            print(head + " | | |")
    if LLAMA_7B in last_out:
        _summary(json.loads(last_out[LLAMA_7B])["memory"])


def _summary(report: dict) -> None:
    gib = 2**30
    print("\nLlama 7B, batch 1, sequence 4096, on meta: saved for backward, GiB (tensors)\n")
    print(f"| | eager | compiled ({report['backend']}) |")
    print("|---|---:|---:|")
    for kind in ("activation", "parameter", "buffer", "input"):
        e, c = report["eager"]["by_kind"][kind], report["compiled"]["by_kind"][kind]
        print(f"| {kind} | {e['bytes'] / gib:.2f} ({e['tensors']}) | {c['bytes'] / gib:.2f} ({c['tensors']}) |")
    print(f"| parameters / gradients held | {report['parameters']['bytes'] / gib:.2f} / "
          f"{report['gradients']['bytes'] / gib:.2f} | |")
    print(f"| ops recomputed in backward | | {len(report['recomputed'])} |")


if __name__ == "__main__":
    main()
