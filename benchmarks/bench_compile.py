"""What `graphtool compile` costs beside the bare compile it measures, side by side, each in a fresh process.

    python benchmarks/bench_compile.py [--repeat 3] [--models mlp,decoder]

The bare way: a script that loads the same model, runs one eager training step and the first call of
`torch.compile(model)` (inductor, caches off, as graphtool's child compiles it). `graphtool compile` runs its child on
top: eager steps timed, the compile, the compiled steps timed, each repeated block compiled alone by dynamo, and
its own start-up and report. Target: at most 1.3x the bare compile (docs/benchmarks.md).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _bench import machine_line, time_once

ROOT = Path(__file__).resolve().parents[1]
GT = shutil.which("graphtool") or "graphtool"
MODELS = {"mlp": ROOT / "examples" / "mlp.py", "decoder": ROOT / "tests" / "fixtures" / "compile" / "decoder.py"}
BARE = (
    "import os, runpy, sys\n"
    "os.environ['TORCHINDUCTOR_FORCE_DISABLE_CACHES'] = '1'\n"
    "import torch\n"
    "made = runpy.run_path(sys.argv[1])['get_model_and_inputs']()\n"
    "model, args, kwargs = made[0], made[1], (made[2] if len(made) > 2 else {})\n"
    "def step(m):\n"
    "    out = m(*args, **kwargs)\n"
    "    (out.logits if hasattr(out, 'logits') else out).sum().backward()\n"
    "step(model)\n"
    "step(torch.compile(model))\n"
)
TARGET = 1.3


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--models", default="mlp,decoder")
    args = parser.parse_args()
    env = dict(os.environ)
    cases = []
    for name in args.models.split(","):
        path = str(MODELS[name])
        cases.append((f"bare torch.compile ({name})", [sys.executable, "-c", BARE, path], None))
        cases.append((f"graphtool compile ({name})", [GT, "compile", path, "--format", "json"], f"bare torch.compile ({name})"))
    times = {c[0]: [] for c in cases}
    for i in range(args.repeat):  # alternate so noise hits both alike
        for name, cmd, _ in cases:
            times[name].append(time_once(cmd, env=env))
            print(f"[{i + 1}/{args.repeat}] {name}: {times[name][-1]:.2f}s", file=sys.stderr)
    print(f"\n{machine_line(args.repeat)}\n")
    print("| command | median s | min s | vs | result | target |")
    print("|---|---:|---:|---|---:|---:|")
    for name, _, base in cases:
        med = statistics.median(times[name])
        row = f"| {name} | {med:.2f} | {min(times[name]):.2f} |"
        if base:
            ratio = med / statistics.median(times[base])
            row += f" {base} | {ratio:.2f}x | <= {TARGET}x {'ok' if ratio <= TARGET else 'OVER'} |"
        else:
            row += " | | |"
        print(row)


if __name__ == "__main__":
    main()
