"""Time ``graphtool cudagraphs --steps 3`` (the steady state, the default) against ``--steps 1`` (one trace).

    python benchmarks/bench_steady.py [--repeat 3]

The target (issue 22): three steps cost at most 1.5x one trace of the same model; a recompile costs what
torch's costs. Models: the 12-layer encoder (benchmarks/encoder12.py, training) and a transformers decoder
(examples/hf_llama.py, training). Each command runs in a fresh process, the two step counts taking turns going
first (ABBA) so a drift in load hits both alike; prints a markdown table: median and min wall seconds, the
ratio of the medians and its target.
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
ROOT = HERE.parent
GT = shutil.which("graphtool") or "graphtool"
MODELS = {"encoder12 (training)": str(HERE / "encoder12.py"), "hf_llama (training)": str(ROOT / "examples" / "hf_llama.py")}
TARGET = 1.5


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    print(f"{machine_line(args.repeat)}\n")
    print("| model | --steps 1 median s | min | --steps 3 median s | min | ratio | target |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    for name, path in MODELS.items():
        runs: dict[int, list[float]] = {1: [], 3: []}
        for i in range(args.repeat):
            for n in ((1, 3) if i % 2 == 0 else (3, 1)):
                runs[n].append(time_once([GT, "cudagraphs", path, "--steps", str(n), "--format", "json"]))
        one, three = statistics.median(runs[1]), statistics.median(runs[3])
        ratio = three / one
        mark = "ok" if ratio <= TARGET else "MISSED"
        print(f"| {name} | {one:.2f} | {min(runs[1]):.2f} | {three:.2f} | {min(runs[3]):.2f} | {ratio:.2f} | <= {TARGET} {mark} |")


if __name__ == "__main__":
    main()
