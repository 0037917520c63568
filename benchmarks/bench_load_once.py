"""Time ``graphtool trace MODEL --cudagraphs inductor --bench`` and ``graphtool report MODEL`` on a model
whose build is slow, before and after the script runs once per command (issue 33), side by side.

    python benchmarks/bench_load_once.py [--repeat 3] [--seconds 5] [--before 4219f00]

"Before" is graphtool at ``--before`` (a git revision of this repository, exported with ``git archive``
into a temporary folder; 4219f00 is the last commit that loaded the script for each trace), "after" this
checkout. benchmarks/slow_build.py sleeps ``--seconds`` in its factory (a big config, a tokenizer, a
checkpoint read) and counts its builds. Each command runs in a fresh process, before and after taking
turns going first so a drift in load hits both alike; prints a markdown table: the median and the
fastest wall seconds (on a shared machine the fastest is the one least slowed by others), the builds
each command made, and what one run saves (medians).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _bench import machine_line, time_once

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
MODEL = HERE / "slow_build.py"


def export(rev: str, folder: Path) -> Path:
    """graphtool as it was at ``rev``: its tree exported into ``folder``."""
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", rev, "graphtool"], check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(folder)], input=archive, check=True)
    return folder


def run(root: Path, argv: list[str], seconds: float, folder: Path) -> tuple[float, int]:
    """Wall seconds of one fresh ``python -m graphtool ARGV`` importing graphtool from ``root``, and the builds it made."""
    count = folder / "builds.txt"
    count.unlink(missing_ok=True)
    env = {**os.environ, "PYTHONPATH": str(root), "SLOW_BUILD_SECONDS": str(seconds), "SLOW_BUILD_COUNT": str(count)}
    # -P: the current folder (a checkout holding graphtool/) is not put first on sys.path; PYTHONPATH picks the version
    wall = time_once([sys.executable, "-P", "-m", "graphtool", *argv], env=env)
    return wall, len(count.read_text().splitlines()) if count.exists() else 0


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=5.0, help="how long the model's build takes")
    parser.add_argument("--before", default="4219f00", help="the git revision to time as 'before'")
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="graphtool-bench-load-once-"))
    try:
        (folder / "before").mkdir()
        before = export(args.before, folder / "before")
        page = folder / "page.html"
        cases = [
            ("`graphtool trace MODEL --cudagraphs inductor --bench`", ["trace", str(MODEL), "--cudagraphs", "inductor",
                                                                       "--bench", "--format", "json"]),
            ("`graphtool report MODEL`", ["report", str(MODEL), "-o", str(page)]),
        ]
        print(machine_line(args.repeat, f", a build of {args.seconds:g} s (benchmarks/slow_build.py)"))
        print(f"| command | before ({args.before}) s, median (min) | builds | after s, median (min) | builds | saved s | speed-up |")
        print("|---|---:|---:|---:|---:|---:|---:|")
        for name, argv in cases:
            times: dict[str, list[float]] = {"before": [], "after": []}
            builds: dict[str, int] = {}
            for i in range(args.repeat):
                order = [("before", before), ("after", ROOT)]
                for which, root in order if i % 2 == 0 else order[::-1]:
                    wall, n = run(root, argv, args.seconds, folder)
                    times[which].append(wall)
                    builds[which] = n
            b, a = statistics.median(times["before"]), statistics.median(times["after"])
            print(f"| {name} | {b:.1f} ({min(times['before']):.1f}) | {builds['before']} | {a:.1f} ({min(times['after']):.1f}) "
                  f"| {builds['after']} | {b - a:.1f} | {b / a:.2f}x |")
    finally:
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
