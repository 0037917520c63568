"""``graphtool trace``: every compiled region's forward and backward graphs, every input named.

Example::

    >>> [r.report.to_dict()["graphs"][0]["forward"]["nodes"] for r in trace("examples/mlp.py")]
    [11]
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

from graphtool.commands import steps
from graphtool.commands.progress import SILENT, Progress


@dataclass(frozen=True)
class TraceResult:
    """One model's trace: the report, the optional CUDA-graph verdict and bench timings, and the
    graphs' readable code (``forward.py``...) for ``--out``."""

    target: str
    report: Any  # TraceReport
    verdict: Any = None  # Verdict
    bench: Any = None  # BenchReport
    graph_code: Optional[dict] = None  # file name -> Python source of the graph

    def to_dict(self) -> dict:
        data = self.report.to_dict()
        if self.verdict is not None:
            data["cudagraphs"] = self.verdict.to_dict()
        if self.bench is not None:
            data["bench"] = self.bench.to_dict()
        return data


def trace(model: Optional[str] = None, *, entry: Optional[str] = None, device: Optional[str] = None,
          inference: bool = False, backend: str = "inductor", cudagraphs: Optional[str] = None, bench: bool = False,
          graph_code: bool = False, debug: bool = False, progress: Progress = SILENT) -> list[TraceResult]:
    """Trace every model with ``backend``'s AOT stage; ``cudagraphs`` (a backend) adds the verdict,
    ``bench`` the timings, ``graph_code`` each graph's readable source."""
    from graphtool.analysis.trace_report import build_trace_report

    steps.check_backend(backend)
    if cudagraphs:
        from graphtool.analysis.cudagraphs import check_backend

        check_backend(cudagraphs)
    results = []
    for target, ent in steps.targets(model, entry):
        capture = steps.trace_own_device(target, ent, device, inference, backend=backend, debug=debug, progress=progress)
        verdict = timings = code = None
        if cudagraphs:
            from dataclasses import replace

            from graphtool.analysis.cudagraphs import cudagraph_verdict
            from graphtool.analysis.steady_state import steady_state
            from graphtool.capture.steady_state import DEFAULT_STEPS

            standin, accel = steps.trace_standin(target, ent, device, inference, backend=cudagraphs, debug=debug,
                                                 progress=progress, steps=DEFAULT_STEPS)
            verdict = cudagraph_verdict(standin, backend=cudagraphs, predicted=accel == "meta")
            verdict = replace(verdict, steady=steady_state(standin, verdict))
        if bench:
            timings = steps.eager_vs_compiled(target, ent, progress=progress)
        if graph_code:
            from graphtool.render.graph_code import graph_files

            code = {path.name: text for path, text in graph_files(capture, Path(".")).items()}
        results.append(TraceResult(target, build_trace_report(capture), verdict, timings, code))
    return results
