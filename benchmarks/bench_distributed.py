"""Time a world-size-8 prediction against graphtool's single-process trace of the same model, and the real thing.

    python benchmarks/bench_distributed.py [--repeat 2] [--world-size 8] [--real]

The target (issue 26): ``graphtool trace MODEL --ddp --world-size 8`` (and ``--fsdp2`` where this graphtool
has it) costs at most 2x ``graphtool trace MODEL`` (one process, no wrapper). With ``--real`` the table also
times the bare torch way of learning the same facts: 8 real gloo processes on this machine, each running
``DDP(torch.compile(model))`` for one step (tests/truth/models/ddp_rank.py), which is what a user would
otherwise launch. Each command runs in a fresh process, the variants taking turns going first so a drift in
load hits all alike; prints a markdown table: median and min wall seconds and the ratio to the plain trace.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _bench import machine_line, time_once

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
GT = shutil.which("graphtool") or "graphtool"
RANK = ROOT / "tests" / "truth" / "models" / "ddp_rank.py"
MODELS = {"mlp8 (8 x Linear 512)": ROOT / "tests" / "fixtures" / "ddp" / "mlp8.py",
          "hf_llama (transformers decoder)": ROOT / "examples" / "hf_llama.py",
          # its forward reads the rank: --ddp traces rank 0, rank 1 and the last rank
          "rank0_print (forward reads its rank)": ROOT / "tests" / "fixtures" / "ddp" / "rank0_print.py"}
TARGET = 2.0


def has_option(option: str) -> bool:
    """Whether this graphtool's ``trace`` takes ``option`` (its help, wide enough not to wrap)."""
    out = subprocess.run([GT, "trace", "--help"], capture_output=True, text=True, env={**os.environ, "COLUMNS": "200"})
    return option in out.stdout


def real_ranks(script: Path, world: int) -> float:
    """Wall seconds of ``world`` real gloo ranks, each one DDP(torch.compile(model)) step."""
    with tempfile.TemporaryDirectory() as tmp:
        start = time.perf_counter()
        procs = [subprocess.Popen([sys.executable, str(RANK), str(script), str(r), str(world), f"{tmp}/store", "25", "0",
                                   f"{tmp}/rank{r}.json"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
                 for r in range(world)]
        try:
            for p in procs:
                if p.wait(timeout=900) != 0:
                    raise SystemExit(f"a real rank failed:\n{p.stderr.read().decode()[-2000:]}")
        finally:
            for p in procs:
                p.kill()
                p.wait()
        return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--world-size", type=int, default=8)
    parser.add_argument("--real", action="store_true", help="also time WORLD real gloo ranks (slow on 2 cores)")
    args = parser.parse_args()
    ws = str(args.world_size)
    variants = {"trace": []}
    variants[f"trace --ddp --world-size {ws}"] = ["--ddp", "--world-size", ws]
    if has_option("--fsdp2"):
        variants[f"trace --fsdp2 --world-size {ws}"] = ["--fsdp2", "--world-size", ws]
    print(f"{machine_line(args.repeat)}\n")
    print("| model | command | median s | min s | x plain trace | target |")
    print("| --- | --- | ---: | ---: | ---: | ---: |")
    for name, path in MODELS.items():
        runs: dict[str, list[float]] = {v: [] for v in variants}
        for i in range(args.repeat):
            order = list(variants) if i % 2 == 0 else list(reversed(variants))
            for v in order:
                runs[v].append(time_once([GT, "trace", str(path), *variants[v], "--format", "json"]))
        base = statistics.median(runs["trace"])
        for v, walls in runs.items():
            med = statistics.median(walls)
            target = "" if v == "trace" else f"<= {TARGET} {'ok' if med / base <= TARGET else 'MISSED'}"
            print(f"| {name} | `graphtool {v}` | {med:.2f} | {min(walls):.2f} | {med / base:.2f} | {target} |")
        if args.real and "model =" in path.read_text():  # ddp_rank.py reads a script's module-level model
            real = real_ranks(path, args.world_size)
            print(f"| {name} | {ws} real gloo ranks, one DDP(torch.compile) step | {real:.2f} | {real:.2f} | "
                  f"{real / base:.2f} | |")


if __name__ == "__main__":
    main()
