"""Render speed, side by side in one run, each command in a fresh process, the same `dot` for all.

    python benchmarks/bench_render.py [--repeat 3]

- graphtool render --graph autograd --collapse none -o x.svg  vs  torchviz make_dot(...).render(svg)
  on the 12-layer encoder; target: at most 1.0x.
- the collapsed view: under 2 s on top of building the model (import torch + build + forward).
- a 96-layer encoder (ENCODER_LAYERS=96): the collapsed view under 5 s on top of model build.

Both tools find `dot` on PATH: this script puts a `dot` that is graphviz-pure first on PATH unless a
system Graphviz is installed, so both lay out with the same program.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _bench import machine_line, time_once

HERE = Path(__file__).resolve().parent
MODEL = str(HERE / "encoder12.py")
GT = shutil.which("graphtool") or "graphtool"

TORCHVIZ = """
import runpy, sys, torch
from torchviz import make_dot
model, inputs = runpy.run_path(sys.argv[1])["get_model_and_inputs"]()
out = model(*inputs)
make_dot(out, params=dict(model.named_parameters())).render(sys.argv[2], format="svg", cleanup=True)
"""
BUILD = """
import runpy, sys, torch
model, inputs = runpy.run_path(sys.argv[1])["get_model_and_inputs"]()
out = model(*inputs)
"""


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="graphtool-bench-"))
    env = dict(os.environ)
    dot = shutil.which("dot")
    if dot is None:
        pure = shutil.which("graphviz-pure")
        if pure is None:
            raise SystemExit("no dot and no graphviz-pure: pip install graphviz-pure")
        (tmp / "bin").mkdir()
        (tmp / "bin" / "dot").symlink_to(pure)
        env["PATH"] = f"{tmp / 'bin'}{os.pathsep}{env['PATH']}"
        dot = f"graphviz-pure ({pure})"
    env96 = {**env, "ENCODER_LAYERS": "96"}
    cases = [
        ("build: import torch + model + forward (12 layers)", [sys.executable, "-c", BUILD, MODEL], env),
        ("torchviz make_dot().render(svg) (12 layers)", [sys.executable, "-c", TORCHVIZ, MODEL, str(tmp / "tv")], env),
        ("graphtool render --collapse none (12 layers)", [GT, "render", MODEL, "--collapse", "none", "-o", str(tmp / "g.svg")], env),
        ("graphtool render, collapsed (12 layers)", [GT, "render", MODEL, "-o", str(tmp / "c.svg")], env),
        ("build: import torch + model + forward (96 layers)", [sys.executable, "-c", BUILD, MODEL], env96),
        ("graphtool render, collapsed (96 layers)", [GT, "render", MODEL, "-o", str(tmp / "c96.svg")], env96),
    ]
    times = {c[0]: [] for c in cases}
    for i in range(args.repeat):
        for name, cmd, e in cases:
            times[name].append(time_once(cmd, e))
            print(f"[{i + 1}/{args.repeat}] {name}: {times[name][-1]:.2f}s", file=sys.stderr)
    med = {k: statistics.median(v) for k, v in times.items()}
    print(f"\n{machine_line(args.repeat, f', layout by {dot}')}\n")
    print("| command | median s | result | target |")
    print("|---|---:|---:|---:|")
    b12 = med["build: import torch + model + forward (12 layers)"]
    b96 = med["build: import torch + model + forward (96 layers)"]
    rows = [
        ("build: import torch + model + forward (12 layers)", "", ""),
        ("torchviz make_dot().render(svg) (12 layers)", "", ""),
        ("graphtool render --collapse none (12 layers)",
         f"{med['graphtool render --collapse none (12 layers)'] / med['torchviz make_dot().render(svg) (12 layers)']:.2f}x torchviz", "<= 1.0x"),
        ("graphtool render, collapsed (12 layers)", f"{med['graphtool render, collapsed (12 layers)'] - b12:.2f} s over build", "< 2 s"),
        ("build: import torch + model + forward (96 layers)", "", ""),
        ("graphtool render, collapsed (96 layers)", f"{med['graphtool render, collapsed (96 layers)'] - b96:.2f} s over build", "< 5 s"),
    ]
    for name, result, target in rows:
        print(f"| {name} | {med[name]:.2f} | {result} | {target} |")
    print(f"\npictures in {tmp}")


if __name__ == "__main__":
    main()
