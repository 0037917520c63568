"""Time ``graphtool memory`` alone beside ``memory --fit 24GiB --budgets`` (a sweep of 6 budgets), side by side.

    python benchmarks/bench_fit.py [--repeat 3] [--model tests/fixtures/fit/cnn.py]

Each command runs in a fresh process, alternating (ABBA) so machine noise hits both alike. Prints a markdown table
(median and min wall seconds, the ratio and its target: issue 35 asks for a 6-budget sweep at most 2x one
``memory`` run, since the trace is shared and only torch's partition is redone per budget).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _bench import machine_line

ROOT = Path(__file__).resolve().parent.parent
GT = shutil.which("graphtool") or "graphtool"


def once(cmd: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=os.environ)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--model", default=str(ROOT / "tests" / "fixtures" / "fit" / "cnn.py"))
    ns = parser.parse_args()
    plain = [GT, "memory", ns.model, "--format", "json"]
    sweep = plain + ["--fit", "24GiB", "--budgets"]
    times: dict[str, list[float]] = {"memory": [], "memory --fit 24GiB --budgets (6)": []}
    for i in range(ns.repeat):
        order = list(times) if i % 2 == 0 else list(reversed(times))
        for name in order:
            times[name].append(once(plain if name == "memory" else sweep))
    print(machine_line(ns.repeat))
    print(f"model: {os.path.relpath(ns.model, ROOT)}, {ns.repeat} runs each\n")
    print("| command | median s | min s | ratio | target |")
    print("| --- | ---: | ---: | ---: | ---: |")
    base = statistics.median(times["memory"])
    for name, ts in times.items():
        med = statistics.median(ts)
        ratio = "" if name == "memory" else f"{med / base:.2f}x"
        print(f"| `{name}` | {med:.1f} | {min(ts):.1f} | {ratio} | {'' if name == 'memory' else '<= 2x'} |")


if __name__ == "__main__":
    main()
