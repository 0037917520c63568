"""`graphtool bench` against the hand-written script doing the same work, side by side in one run.

    python benchmarks/bench_bench.py [--repeat 5] [--iters 100]

Both run the small MLP at batch size 1 (benchmarks/mlp_bs1.py) with --iters 100 and the same
warm-up, repeats, rotating inputs and checks against eager (benchmarks/handwritten_bench.py), each
in a fresh process, alternating so machine noise hits both alike. On CPU: eager and
torch.compile (default backend). With CUDA: eager, CUDA-graph replay and reduce-overhead too
(--cudagraphs --compile none), the issue's case. One untimed run of each first fills torch's
compile caches for both. Target: graphtool's wall at most 1.2x the script's.
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
MODEL = str(HERE / "mlp_bs1.py")
GT = shutil.which("graphtool") or "graphtool"
TARGET = 1.2


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--iters", type=int, default=100)
    args = parser.parse_args()
    import torch

    modes = ["--cudagraphs", "--compile", "none"] if torch.cuda.is_available() else ["--compile", "default"]
    device = torch.cuda.get_device_name() if torch.cuda.is_available() else "cpu"
    cases = {
        "hand-written script": [sys.executable, str(HERE / "handwritten_bench.py"), MODEL, str(args.iters), *modes],
        "graphtool bench": [GT, "bench", MODEL, "--iters", str(args.iters), *modes, "--format", "json"],
    }
    for cmd in cases.values():
        time_once(cmd)  # fills the inductor and FX graph caches for both
    times: dict[str, list[float]] = {name: [] for name in cases}
    for i in range(args.repeat):
        for name, cmd in cases.items():
            times[name].append(time_once(cmd))
            print(f"[{i + 1}/{args.repeat}] {name}: {times[name][-1]:.2f}s", file=sys.stderr)
    print(f"\n{machine_line(args.repeat, f', torch {torch.__version__}, {device}')}\n")
    print(f"MLP at batch size 1, --iters {args.iters}, {' '.join(modes)}\n")
    print("| command | median s | min s | ratio | target |")
    print("|---|---:|---:|---:|---:|")
    base = statistics.median(times["hand-written script"])
    for name, walls in times.items():
        med = statistics.median(walls)
        ratio = med / base
        target = "" if name.startswith("hand") else f"<= {TARGET}x {'ok' if ratio <= TARGET else 'OVER'}"
        print(f"| {name} | {med:.2f} | {min(walls):.2f} | {ratio:.2f}x | {target} |")


if __name__ == "__main__":
    main()
