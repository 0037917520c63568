"""``graphtool shapes`` over a 100-step schedule whose shapes settle, against one stand-in trace.

    python benchmarks/bench_shapes.py [--repeat 3] [--steps 100]

The tiny Llama of tests/fixtures/shapes/decoder_infer.py, in inference, over ``--steps`` steps cycling through
four sequence lengths (17, 33, 64, 128): automatic dynamic compiles 2 graphs, then every size has been seen and a
settled signature is not run again. "one trace" is ``trace_model`` of one step on a fresh stand-in; "100 steps"
is the whole prediction without advice (``shapes(..., advise=False)``). Both in this process, after one untimed
run of each (torch's import and first compile are not what is compared); medians of ``--repeat``. Target: the
schedule at most 3x the one trace (issue 34).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))
MODEL = str(ROOT / "tests" / "fixtures" / "shapes" / "decoder_infer.py")
TARGET = 3.0


def one_trace() -> float:
    from graphtool.capture.standin.meta import to_meta
    from graphtool.capture.tracer import trace_model
    from graphtool.capture.user.script import load_model

    spec = to_meta(load_model(MODEL))
    start = time.perf_counter()
    trace_model(spec, inference=True, standin=True)
    return time.perf_counter() - start


def schedule(steps: int) -> tuple[float, object]:
    from graphtool.commands.shapes import shapes

    sizes = ",".join(str(n) for n, _ in zip(__import__("itertools").cycle([17, 33, 64, 128]), range(steps)))
    start = time.perf_counter()
    [r] = shapes(MODEL, sizes=[f"input_ids:1={sizes}"], inference=True, advise=False)
    return time.perf_counter() - start, r.report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--steps", type=int, default=100)
    args = parser.parse_args()
    one_trace()
    schedule(args.steps)
    traces = [one_trace() for _ in range(args.repeat)]
    runs = [schedule(args.steps) for _ in range(args.repeat)]
    t1, tn = statistics.median(traces), statistics.median(t for t, _ in runs)
    report = runs[-1][1]
    settled = sum(s.settled for s in report.per_step)
    print(f"{'case':<28}{'median s':>10}{'x one trace':>14}")
    print(f"{'one trace (1 step)':<28}{t1:>10.2f}{1.0:>14.2f}")
    print(f"{f'{args.steps} steps (4 sizes)':<28}{tn:>10.2f}{tn / t1:>14.2f}")
    print(f"graphs compiled {report.graphs_compiled}, steps settled (not run) {settled} of {report.steps}; "
          f"target <= {TARGET:.0f}x: {'met' if tn / t1 <= TARGET else 'NOT met'}")


if __name__ == "__main__":
    main()
