"""GPU measurements for `graphtool bench --cudagraphs` (needs CUDA; exits 2 without it).

    python benchmarks/bench_cudagraphs_gpu.py

On the MLP at batch size 1 (`graphtool bench benchmarks/mlp_bs1.py --cudagraphs --compile none
--iters 100 --repeat 3`): graphtool's replay speedup over eager within 10% of
mode="reduce-overhead"'s; replay time at most 1.2x the sum of the kernel times torch.profiler records
for one iteration (copy-in and forward: the floor); the median's spread across three repeats under 3%.
The tool's own overhead against a hand-written script doing the same work is
benchmarks/bench_bench.py, which runs the CUDA-graph case when CUDA is present.
Write the printed tables into docs/gpu-results.md with the date, device and torch version.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
MODEL = str(HERE / "mlp_bs1.py")
GT = shutil.which("graphtool") or "graphtool"


def run(cmd) -> str:
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"{cmd[:3]} failed:\n{proc.stderr[-2000:]}")
    return proc.stdout


def kernel_floor_ms(torch, model, x) -> float:
    """Sum of CUDA kernel times of one iteration as replay runs it: copy the input in, forward."""
    from torch.profiler import ProfilerActivity, profile

    model, x = model.cuda(), x.cuda()
    static = x.clone()
    with torch.no_grad():
        for _ in range(5):
            static.copy_(x)
            model(static)
        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            static.copy_(x)
            model(static)
            torch.cuda.synchronize()
    total_us = sum(e.device_time_total for e in prof.key_averages() if e.device_time_total)
    return total_us / 1000.0


def main() -> int:
    import runpy

    import torch

    if not torch.cuda.is_available():
        print("no CUDA device is present: these measurements need a GPU", file=sys.stderr)
        return 2
    report = json.loads(run([GT, "bench", MODEL, "--cudagraphs", "--compile", "none", "--iters", "100",
                             "--repeat", "3", "--format", "json"]))
    modes = {m["name"]: m for m in report["modes"]}
    replay, ro = modes["cudagraph replay"], modes.get("compile[reduce-overhead]")
    if replay["status"] != "ok":
        raise SystemExit(f"replay did not run: {replay.get('reason')}")
    model, (x,) = runpy.run_path(MODEL)["get_model_and_inputs"]()[:2]
    floor = kernel_floor_ms(torch, model, x)
    print(f"device {torch.cuda.get_device_name()}, torch {torch.__version__}")
    print("| measurement | value | target |")
    print("|---|---:|---:|")
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
