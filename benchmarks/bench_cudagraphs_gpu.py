"""GPU measurements for `graphtool bench --cudagraphs` (needs CUDA; exits 2 without it).

    python benchmarks/bench_cudagraphs_gpu.py

1. Tool overhead: `graphtool bench benchmarks/mlp_bs1.py --cudagraphs --compile none --iters 100`
   against benchmarks/handwritten_cudagraph.py doing the same capture, replay and event timing,
   each in a fresh process; target: at most 1.2x.
2. On the MLP at batch size 1: graphtool's replay speedup over eager within 10% of
   mode="reduce-overhead"'s; replay time at most 1.2x the sum of the kernel times torch.profiler
   records for one iteration; the median's spread across three repeats under 3%.
Write the printed table into docs/gpu-results.md with the date, device and torch version.
"""

from __future__ import annotations

import json
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
MODEL = str(HERE / "mlp_bs1.py")
GT = shutil.which("graphtool") or "graphtool"


def wall(cmd) -> tuple[float, str]:
    t = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"{cmd[:3]} failed:\n{proc.stderr[-2000:]}")
    return time.perf_counter() - t, proc.stdout


def kernel_floor_ms(torch, runpy_model) -> float:
    """Sum of CUDA kernel times for one eager forward, from torch.profiler."""
    model, (x,) = runpy_model
    model, x = model.cuda(), x.cuda()
    from torch.profiler import ProfilerActivity, profile

    with torch.no_grad():
        for _ in range(5):
            model(x)
        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            model(x)
            torch.cuda.synchronize()
    total_us = sum(e.device_time_total for e in prof.key_averages() if e.device_time_total)
    return total_us / 1000.0


def main() -> int:
    import runpy

    import torch

    if not torch.cuda.is_available():
        print("no CUDA device is present: these measurements need a GPU", file=sys.stderr)
        return 2
    gt_walls, hw_walls = [], []
    report = None
    for _ in range(3):
        w, out = wall([GT, "bench", MODEL, "--cudagraphs", "--compile", "none", "--iters", "100", "--format", "json"])
        gt_walls.append(w)
        report = json.loads(out)
        w, _ = wall([sys.executable, str(HERE / "handwritten_cudagraph.py"), MODEL, "100"])
        hw_walls.append(w)
    modes = {m["name"]: m for m in report["modes"]}
    replay, ro = modes["cudagraph replay"], modes.get("compile[reduce-overhead]")
    floor = kernel_floor_ms(torch, runpy.run_path(MODEL)["get_model_and_inputs"]())
    ratio = statistics.median(gt_walls) / statistics.median(hw_walls)
    print(f"device {torch.cuda.get_device_name()}, torch {torch.__version__}")
    print("| measurement | value | target |")
    print("|---|---:|---:|")
    print(f"| graphtool bench wall / hand-written wall | {ratio:.2f}x | <= 1.2x |")
    print(f"| replay speedup over eager | {replay['speedup_vs_eager']:.2f}x | |")
    if ro and ro.get("speedup_vs_eager"):
        gap = abs(replay["speedup_vs_eager"] - ro["speedup_vs_eager"]) / ro["speedup_vs_eager"] * 100
        print(f"| reduce-overhead speedup over eager | {ro['speedup_vs_eager']:.2f}x | |")
        print(f"| replay vs reduce-overhead speedup gap | {gap:.1f}% | within 10% |")
    print(f"| replay median / profiler kernel floor ({floor:.4f} ms) | {replay['median_ms'] / floor:.2f}x | <= 1.2x |")
    print(f"| replay spread across 3 repeats | {replay['spread_pct']:.2f}% | < 3% |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
