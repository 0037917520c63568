"""``graphtool trace``: every compiled region's forward and backward graphs, every input named.

Example::

    >>> [r.report.to_dict()["graphs"][0]["forward"]["nodes"] for r in trace("examples/mlp.py")]
    [11]
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

from graphtool.commands import shared
from graphtool.commands.launch import Launch, launch_of
from graphtool.commands.progress import SILENT, Progress
from graphtool.commands.result import Result
from graphtool.schema import stamped


@dataclass(frozen=True, repr=False)
class TraceResult(Result):
    """One model's trace: the report, the optional CUDA-graph verdict and bench timings, and the
    graphs' readable code (``forward.py``...) for ``--out``."""

    command = "trace"

    target: str
    report: Any  # TraceReport
    verdict: Any = None  # Verdict
    bench: Any = None  # BenchReport
    graph_code: Optional[dict] = None  # file name -> Python source of the graph
    ddp: Any = None  # DdpReport: what DDP(torch.compile(model)) does to the graphs (``--ddp``)
    fsdp2: Any = None  # Fsdp2Report: what fully_shard does to the graphs, per rank (``--fsdp2``)

    def to_dict(self) -> dict:
        data = self.report.to_dict()
        if self.verdict is not None:
            data["cudagraphs"] = self.verdict.to_dict()
        if self.bench is not None:
            data["bench"] = self.bench.to_dict()
        if self.ddp is not None:
            data["ddp"] = self.ddp.to_dict()
        if self.fsdp2 is not None:
            data["fsdp2"] = self.fsdp2.to_dict()
        return stamped(self.command, data)

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
        if self.ddp is not None:
            from graphtool.render.distributed import ddp_view

            parts.append(ddp_view(self.ddp))
        if self.fsdp2 is not None:
            from graphtool.render.distributed import fsdp2_view

            parts.append(fsdp2_view(self.fsdp2))
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
        return bool(self.ddp is not None and (self.ddp.unused or {}).get("fails_at_step"))

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


def trace(model: Optional[str] = None, *, entry: Optional[str] = None, device: Optional[str] = None,
          inference: bool = False, backend: str = "inductor", cudagraphs: Optional[str] = None, bench: bool = False,
          graph_code: bool = False, debug: bool = False, progress: Progress = SILENT,
          ddp: Optional[dict] = None, fsdp2: Optional[dict] = None, coverage: bool = False) -> list[TraceResult]:
    """Trace every model with ``backend``'s AOT stage; ``cudagraphs`` (a backend) adds the verdict,
    ``bench`` the timings, ``graph_code`` each graph's readable source. ``ddp`` (``world_size``,
    ``bucket_cap_mb``) runs the model as ``DDP(torch.compile(model))``: each graph DDP's optimizer
    splits off is one region, and the result's ``ddp`` says where and why. ``fsdp2`` (``world_size``)
    runs it under ``fully_shard`` as rank 0 of a fake process group: the result's ``fsdp2`` says what
    FSDP2 does to the graphs, its collectives and each rank's memory. ``coverage`` adds capture coverage
    (:mod:`graphtool.capture.coverage`: the share of torch calls in compiled graphs, nested graph breaks off and on)."""
    shared.check_aot_backend(backend)
    if cudagraphs:
        from graphtool.analysis.cudagraphs.verdict import check_cudagraph_backend

        check_cudagraph_backend(cudagraphs)
    launch = launch_of(ddp, fsdp2, device)
    results = []
    for target, ent in shared.targets(model, entry):
        # the script runs once: the stand-in, the host-value replay and the bench derive from that one model
        once = shared.one_load(standin=bool(cudagraphs), plain=bench and launch.wrapped)
        with once if cudagraphs or bench else contextlib.nullcontext():  # one trace alone needs no sharing
            results.append(_one(target, ent, device, inference, backend, cudagraphs, bench, graph_code, debug, progress,
                                launch, coverage))
    return results


def _one(target, ent, device, inference, backend, cudagraphs, bench, graph_code, debug, progress, launch: Launch,
         coverage: bool = False):
    from dataclasses import replace

    from graphtool.analysis.trace_report import build_trace_report

    capture, wrapped = launch.trace_own(target, ent, device, inference, backend, debug=debug, progress=progress)
    report = build_trace_report(capture)
    verdict = timings = code = None
    if coverage and not launch.wrapped:
        from graphtool.analysis.coverage import coverage_of
        from graphtool.capture.coverage import measure_coverage

        progress.phase("measuring capture coverage...")
        report = replace(report, coverage=coverage_of(measure_coverage(capture.spec.model, capture.spec.args, capture.spec.kwargs)))
    if cudagraphs:
        from graphtool.analysis.cudagraphs.verdict import cudagraph_verdict
        from graphtool.analysis.steady_state import steady_state
        from graphtool.capture.steady_state import DEFAULT_STEPS

        # the verdict, from the stand-in run under the same launch (each graph DDP splits off, each FSDP2 block graph)
        standin, accel, standin_wrapped = launch.standin(target, ent, device, inference, cudagraphs, debug=debug,
                                                         progress=progress, n_steps=DEFAULT_STEPS)
        verdict = cudagraph_verdict(standin, backend=cudagraphs, predicted=accel == "meta")
        verdict = replace(verdict, steady=steady_state(standin, verdict))
        wrapped = launch.judged(wrapped, verdict, standin, standin_report=standin_wrapped)
    if bench:
        # what trace traced: training unless --inference (bench's own default), the forward alone with --inference
        timings = shared.eager_vs_compiled(target, ent, backward=False if inference else None, progress=progress)
    if graph_code:
        from graphtool.render.graph_code import graph_files

        code = {path.name: text for path, text in graph_files(capture, Path(".")).items()}
    return TraceResult(target, report, verdict, timings, code, **launch.fields(wrapped))
