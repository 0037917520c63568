"""Time graphtool against the bare torch way, side by side in one run, each in a fresh process.

    python benchmarks/bench_cli.py [--repeat 3]

Prints a markdown table: median and min wall seconds of each command, and the ratio to its
baseline. Rows alternate between graphtool and baseline so machine noise hits both alike.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _bench import machine_line, time_once

HERE = Path(__file__).resolve().parent
MODEL = str(HERE / "encoder12.py")
GT = shutil.which("graphtool") or "graphtool"

TRACE_WAY = "TORCH_TRACE: real torch.compile (inductor), then read the aot graph artifacts (encoder12)"
BARE = "bare: inductor's AOT stage, inner compiler keeping graphs (encoder12)"
TRACE = "graphtool trace --backend inductor --format json (encoder12)"

CASES = [
    # (name, command, baseline name, target ratio)
    ("graphtool --help", [GT, "--help"], None, None),
    (TRACE_WAY, [sys.executable, str(HERE / "torch_trace_way.py"), MODEL], None, None),
    (BARE, [sys.executable, str(HERE / "bare_trace.py"), MODEL], None, None),
    (TRACE, [GT, "trace", MODEL, "--backend", "inductor", "--format", "json"], ((TRACE_WAY, 0.6), (BARE, 1.10)), None),
    ("graphtool cudagraphs --format json (encoder12)", [GT, "cudagraphs", MODEL, "--format", "json"], TRACE, 1.2),
]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    times: dict[str, list[float]] = {name: [] for name, *_ in CASES}
    for i in range(args.repeat):
        for name, cmd, *_ in CASES:
            times[name].append(time_once(cmd))
            print(f"[{i + 1}/{args.repeat}] {name}: {times[name][-1]:.2f}s", file=sys.stderr)
    print(f"\n{machine_line(args.repeat)}\n")
    print("| command | median s | min s | vs | ratio | target |")
    print("|---|---:|---:|---|---:|---:|")
    for name, _, base, target in CASES:
        med = statistics.median(times[name])
        head = f"| {name} | {med:.2f} | {min(times[name]):.2f} |"
        baselines = base if isinstance(base, tuple) else ((base, target),) if base else ()
        for other, limit in baselines:
            ratio = med / statistics.median(times[other])
            ok = "ok" if ratio <= limit else "OVER"
            print(f"{head} {other.split(' (')[0]} | {ratio:.2f}x | <= {limit}x {ok} |")
        if not baselines:
            print(head + " | | |")


if __name__ == "__main__":
    main()
