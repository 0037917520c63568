"""Time ``graphtool report`` beside ``graphtool trace`` on the same model, and the page's size.

    python benchmarks/bench_report.py [--repeat 1] [--with-7b]

Each command runs in a fresh process. The report traces twice (own device and the meta stand-in),
runs one eager forward for memory and lays out every fold level of every graph; the table says what
that costs over a plain trace, and how large the page is (the target: a 12-layer encoder under 3 MB).
Then, in this process, the layout time per picture level (what Graphviz itself takes).
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
ROOT = HERE.parent
# this checkout's graphtool, whichever one is installed
GT = [sys.executable, "-m", "graphtool"]

CASES = [
    ("encoder12 (1,239 + 1,617 nodes)", [str(HERE / "encoder12.py")], {}),
    ("Llama, 2 layers (transformers config)", [str(ROOT / "examples" / "hf_llama.py")], {}),
]
SEVEN_B = ("Llama 7B on meta (32 layers)", [str(ROOT / "examples" / "hf_llama.py"), "--device", "meta"], {"LLAMA_SIZE": "7b"})


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--with-7b", action="store_true")
    args = parser.parse_args()
    cases = CASES + ([SEVEN_B] if args.with_7b else [])
    print(machine_line(args.repeat))
    print("| model | trace s | report s | ratio | page MB | target |")
    print("|---|---:|---:|---:|---:|---:|")
    folder = Path(tempfile.mkdtemp(prefix="graphtool-bench-report-"))
    try:
        for name, argv, extra in cases:
            env = {**os.environ, **extra, "PYTHONPATH": str(ROOT)}
            out = folder / "page.html"
            trace = [time_once([*GT, "trace", *argv, "--format", "json"], env=env) for _ in range(args.repeat)]
            report = [time_once([*GT, "report", *argv, "-o", str(out)], env=env) for _ in range(args.repeat)]
            t, r = statistics.median(trace), statistics.median(report)
            size = out.stat().st_size / 1e6
            target = "< 3 MB" if "encoder12" in name else ""
            print(f"| {name} | {t:.1f} | {r:.1f} | {r / t:.2f}x | {size:.2f} | {target} |")
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    print()
    print("layout per level (this process, encoder12):")
    sys.path.insert(0, str(ROOT))
    from graphtool.commands.report import report

    (result,) = report(str(HERE / "encoder12.py"), memory=False)
    for p in result.pictures:
        for lv in p.levels:
            print(f"  region {p.region} {p.graph}: {lv.name}: {lv.boxes} boxes, {lv.seconds:.2f} s")
    for note in result.notes:
        print(f"  note: {note}")


if __name__ == "__main__":
    main()
