"""Lint speed, side by side in one run, each command in a fresh process.

    python benchmarks/bench_lint.py [--repeat 3]

1. `graphtool lint` on one small model against the bare `torch._dynamo.explain` on the same model.
2. `graphtool lint` on eight example models with --jobs 2 against --jobs 1.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _bench import machine_line, time_once

ROOT = Path(__file__).resolve().parents[1]
GT = shutil.which("graphtool") or "graphtool"
SMALL = str(ROOT / "examples" / "mlp.py")
EIGHT = [str(ROOT / "examples" / n) for n in (
    "mlp.py", "convnet_bn.py", "mutate_input.py", "view_outputs.py",
    "transformer.py", "item_branch.py", "graph_breaks.py", "dynamic_batch.py",
)]
EXPLAIN = (
    "import runpy, sys, torch\n"
    "ns = runpy.run_path(sys.argv[1])\n"
    "model, inputs = ns['get_model_and_inputs']()[:2]\n"
    "print(torch._dynamo.explain(model)(*inputs).graph_break_count)\n"
)

CASES = [
    ("bare: torch._dynamo.explain (mlp)", [sys.executable, "-c", EXPLAIN, SMALL], None, None, None),
    ("graphtool lint (mlp)", [GT, "lint", SMALL, "--format", "json"], "bare: torch._dynamo.explain (mlp)", 1.0, "<="),
    ("graphtool lint 8 models --jobs 1", [GT, "lint", *EIGHT, "--jobs", "1", "--format", "json"], None, None, None),
    ("graphtool lint 8 models --jobs 2", [GT, "lint", *EIGHT, "--jobs", "2", "--format", "json"], "graphtool lint 8 models --jobs 1", 1.6, "speedup>="),
]


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    times = {c[0]: [] for c in CASES}
    for i in range(args.repeat):  # alternate so noise hits both alike
        for name, cmd, *_ in CASES:
            times[name].append(time_once(cmd, ok=(0, 1)))
            print(f"[{i + 1}/{args.repeat}] {name}: {times[name][-1]:.2f}s", file=sys.stderr)
    print(f"\n{machine_line(args.repeat)}\n")
    print("| command | median s | min s | vs | result | target |")
    print("|---|---:|---:|---|---:|---:|")
    for name, _, base, target, kind in CASES:
        med = statistics.median(times[name])
        row = f"| {name} | {med:.2f} | {min(times[name]):.2f} |"
        if base:
            other = statistics.median(times[base])
            if kind == "<=":
                value, ok = med / other, med / other <= target
                row += f" {base} | {value:.2f}x | <= {target}x {'ok' if ok else 'OVER'} |"
            else:
                value, ok = other / med, other / med >= target
                row += f" {base} | {value:.2f}x faster | >= {target}x {'ok' if ok else 'UNDER'} |"
        else:
            row += " | | |"
        print(row)


if __name__ == "__main__":
    main()
