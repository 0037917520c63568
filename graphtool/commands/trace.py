"""``graphtool trace``: every compiled region's forward and backward graphs, every input named.

Example::

    >>> [r.report.to_dict()["graphs"][0]["forward"]["nodes"] for r in trace("examples/mlp.py")]
    [11]
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Optional

from graphtool.commands.result import Result
from graphtool.commands.session import per_model
from graphtool.schema import stamped

if TYPE_CHECKING:
    from graphtool.analysis.bench_report import BenchReport
    from graphtool.analysis.cudagraphs.verdict import Verdict
    from graphtool.analysis.trace_report import TraceReport
    from graphtool.commands.launch import Part


@dataclass(frozen=True, repr=False)
class TraceResult(Result):
    """One model's trace: the report, the optional CUDA-graph verdict and bench timings, and the
    graphs' readable code (``forward.py``...) for ``--out``."""

    command = "trace"

    target: str
    report: TraceReport
    verdict: Optional[Verdict] = None
    bench: Optional[BenchReport] = None
    graph_code: Optional[dict] = None  # file name -> Python source of the graph
    wrapped: Optional[Part] = None  # what DDP(torch.compile(model)) or fully_shard did to the graphs (``--ddp``...)

    def to_dict(self) -> dict:
        data = self.report.to_dict()
        if self.verdict is not None:
            data["cudagraphs"] = self.verdict.to_dict()
        if self.bench is not None:
            data["bench"] = self.bench.to_dict()
        return stamped(self.command, {**data, **(self.wrapped.to_dict() if self.wrapped is not None else {})})

    def _summary_line(self):
        """The line trace ends with (render.trace.summary_line), the CUDA-graph verdict's steady state joined to it."""
        from graphtool.render.trace import summary_line

        said = None
        if self.verdict is not None:
            steady = getattr(self.verdict, "steady", None)
            said = self.verdict.summary() + (f"; steady state {steady.summary()}" if steady else "")
        return summary_line(self.report, said)

    def summary(self) -> str:
        """Regions, breaks, skipped frames, mutations, and (``cudagraphs=``) the CUDA-graph verdict and its steady state."""
        return self._summary_line().plain

    def view(self, *, verbose: bool = False, quiet: bool = False):
        """The report, the CUDA-graph verdict, what DDP or FSDP2 do, and the summary as the very last line;
        ``quiet``: that line alone; ``verbose``: every placeholder (many of one kind are one row, counted)."""
        from rich.console import Group

        from graphtool.render.trace import trace_view

        if quiet:
            return self._summary_line()
        parts = [trace_view(self.report, summary=False, verbose=verbose)]
        if self.verdict is not None:
            from graphtool.render.cudagraphs import cudagraphs_view

            parts.append(cudagraphs_view(self.verdict))
        parts += self._wrapped("view")
        if self.report.coverage is not None:
            from rich.text import Text

            parts.append(Text(self.report.coverage.line()))
        parts.append(self._summary_line())
        return Group(*parts)

    def diagnostics(self) -> str:
        from graphtool.render.diagnostics import format_diagnostics

        return format_diagnostics(self.report.diagnostics())

    def sections(self) -> list[str]:
        from graphtool.render.report import trace_sections

        return trace_sections(self.report)

    @property
    def title(self) -> str:
        return self.report.entry

    @property
    def found(self) -> bool:
        """A loop of this model would fail (``--ddp``: parameters without gradient fail on the second step)."""
        return bool(self.wrapped is not None and self.wrapped.fails)

    @property
    def graph_breaks(self) -> list:
        """Graph breaks (``BreakInfo``), each with ``file``, ``line``, ``reason``."""
        return list(self.report.breaks)

    @property
    def mutated_inputs(self) -> list:
        """Inputs the model mutates (``InputMutation``: ``name``, ``kind``, ``source``)."""
        return list(self.report.mutations.mutated)

    @property
    def extra(self) -> dict:
        """The parts beside the report by name, as earlier releases of the API gave them."""
        return {"verdict": self.verdict, "bench": self.bench, "graph_code": self.graph_code, "title": self.title}


trace = per_model("trace")


def run(session, *, cudagraphs: Optional[str], bench: bool, coverage: bool, graph_code: bool) -> TraceResult:
    """Trace the model with the session's backend's AOT stage, under its launch (``--ddp``: each graph DDP's optimizer
    splits off is one region, every other rank that could differ checked; ``--fsdp2``: as rank 0 under
    ``fully_shard``); ``cudagraphs`` (a backend) adds the session's CUDA-graph verdict and steady state, ``bench`` the
    timings where the script put the model, ``graph_code`` each graph's readable source, ``coverage`` capture coverage
    (:mod:`graphtool.capture.coverage`: the share of torch calls in compiled graphs, nested graph breaks off and on)."""
    from graphtool.analysis.cudagraphs.verdict import check_cudagraph_backend
    from graphtool.analysis.trace_report import build_trace_report

    if cudagraphs:
        check_cudagraph_backend(cudagraphs)  # before any tracing
    if bench and not session.is_object:  # the launch's wrapper may change the model in place: a copy for the timings
        session.loads.want_plain = True
    capture, wrapped, opened = session.own_trace()
    launch = session.launch
    wrapped = launch.across_ranks(session, capture, wrapped, opened)
    report = build_trace_report(capture)
    verdict = timings = code = None
    if coverage and not launch.wrapped:
        from dataclasses import replace

        from graphtool.analysis.coverage import coverage_of
        from graphtool.capture.coverage import measure_coverage

        session.progress.phase("measuring capture coverage...")
        report = replace(report, coverage=coverage_of(measure_coverage(capture.spec.model, capture.spec.args,
                                                                       capture.spec.kwargs)))
    if cudagraphs:
        # the verdict, from the stand-in run under the same launch (each graph DDP splits off, each FSDP2 block graph)
        verdict, standin, _accel, standin_wrapped = session.verdict(cudagraphs)
        wrapped = launch.judged(wrapped, verdict, standin, standin_report=standin_wrapped)
    if bench:
        timings = session.bench(in_place=True).report
    if graph_code:
        from graphtool.render.graph_code import graph_files

        code = {path.name: text for path, text in graph_files(capture, Path(".")).items()}
    return TraceResult(session.target if isinstance(session.target, str) else capture.spec.entry,
                       report, verdict, timings, code, launch.part(wrapped))
