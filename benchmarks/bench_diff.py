"""Time ``graphtool diff`` on two 10 MB trace documents, each run in a fresh process, beside the floor (Python
reading the two files with ``json.load`` and nothing else) and what one ``import torch`` costs, which diff never pays.

    python benchmarks/bench_diff.py [--repeat 5] [--mb 10]

The documents are made here: a real ``graphtool trace --format json`` of examples/transformer.py, its region
repeated until the document is ``--mb`` MB (a model with many graph breaks), with 300 graph breaks; the second
document has every break 3 lines lower (moved), 10 new breaks and one region's nodes changed. Prints a markdown
table and checks that the diff found exactly that.
"""

from __future__ import annotations

import argparse
import copy
import json
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
GT = shutil.which("graphtool") or "graphtool"


def make_documents(folder: Path, mb: float) -> tuple[Path, Path]:
    proc = subprocess.run([GT, "trace", str(HERE.parent / "examples" / "transformer.py"), "--format", "json"],
                          capture_output=True, text=True, check=True)
    doc = json.loads(proc.stdout)
    region = doc["graphs"][0]
    model = doc["model"]["path"]
    doc["graph_breaks"] = [{"file": model, "line": 100 + 5 * i, "reason": "Failed to trace builtin operator", "code": "gb0059",
                            "hint": None, "source_text": f"print('step {i}')"} for i in range(300)]
    graphs, size, i = [], 0, 0
    one = len(json.dumps(region, indent=2)) + 8 * 6  # as written: indented, one level deeper
    while size < mb * 1e6:
        graphs.append({**copy.deepcopy(region), "region": i})
        size += one
        i += 1
    doc["graphs"] = graphs
    after = copy.deepcopy(doc)
    for b in after["graph_breaks"]:
        b["line"] += 3
    after["graph_breaks"] += [{"file": model, "line": 5000 + i, "reason": "Tensor.item", "code": "gb0124", "hint": None,
                               "source_text": f"y{i}.item()"} for i in range(10)]
    after["graphs"][7]["forward"]["nodes"] += 1
    before_path, after_path = folder / "before.json", folder / "after.json"
    before_path.write_text(json.dumps(doc, indent=2))
    after_path.write_text(json.dumps(after, indent=2))
    return before_path, after_path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--mb", type=float, default=10.0)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        before, after = make_documents(Path(tmp), args.mb)
        sizes = f"{before.stat().st_size / 1e6:.1f} MB and {after.stat().st_size / 1e6:.1f} MB"
        check = subprocess.run([GT, "diff", str(before), str(after), "--format", "json"], capture_output=True, text=True, check=True)
        m = json.loads(check.stdout)["models"][0]
        found = (len(m["graph_breaks"]["moved"]), len(m["graph_breaks"]["added"]), len(m["nodes"]))
        if found != (300, 10, 1):
            raise SystemExit(f"the diff found {found} (moved, added, nodes changed), not (300, 10, 1)")
        cases = [
            ("graphtool diff A B --format json", [GT, "diff", str(before), str(after), "--format", "json"]),
            ("graphtool diff A B (text)", [GT, "diff", str(before), str(after)]),
            ("floor: python, json.load of A and B", [sys.executable, "-c",
                                                     f"import json; json.load(open({str(before)!r})); json.load(open({str(after)!r}))"]),
            ("python -c 'import torch' (diff never pays it)", [sys.executable, "-c", "import torch"]),
        ]
        # as an installed graphtool runs: its modules' bytecode cached (this project's machines set
        # PYTHONDONTWRITEBYTECODE, which makes every run compile every module again), written by a first, untimed run
        env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        for _, cmd in cases:
            time_once(cmd, env=env)
        times: dict[str, list[float]] = {name: [] for name, _ in cases}
        for i in range(args.repeat):
            for name, cmd in cases:
                times[name].append(time_once(cmd, env=env))
                print(f"[{i + 1}/{args.repeat}] {name}: {times[name][-1]:.2f}s", file=sys.stderr)
    print(f"\n{machine_line(args.repeat)}; two trace documents of {sizes}\n")
    print("| command | median s | min s |")
    print("|---|---:|---:|")
    for name, _ in cases:
        print(f"| {name} | {statistics.median(times[name]):.2f} | {min(times[name]):.2f} |")


if __name__ == "__main__":
    main()
