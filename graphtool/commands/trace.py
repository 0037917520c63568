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
from graphtool.commands.progress import SILENT, Progress
from graphtool.commands.result import Result


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
        return data

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

    def view(self):
        """The report, the CUDA-graph verdict, what DDP or FSDP2 do, and the summary as the very last line."""
        from rich.console import Group

        from graphtool.render.trace import trace_view

        parts = [trace_view(self.report, summary=False)]
        if self.verdict is not None:
            from graphtool.render.cudagraphs import cudagraphs_view

            parts.append(cudagraphs_view(self.verdict))
        if self.ddp is not None:
            from graphtool.render.distributed import ddp_view

            parts.append(ddp_view(self.ddp))
        if self.fsdp2 is not None:
            from graphtool.render.distributed import fsdp2_view

            parts.append(fsdp2_view(self.fsdp2))
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
          ddp: Optional[dict] = None, fsdp2: Optional[dict] = None) -> list[TraceResult]:
    """Trace every model with ``backend``'s AOT stage; ``cudagraphs`` (a backend) adds the verdict,
    ``bench`` the timings, ``graph_code`` each graph's readable source. ``ddp`` (``world_size``,
    ``bucket_cap_mb``) runs the model as ``DDP(torch.compile(model))``: each graph DDP's optimizer
    splits off is one region, and the result's ``ddp`` says where and why. ``fsdp2`` (``world_size``)
    runs it under ``fully_shard`` as rank 0 of a fake process group: the result's ``fsdp2`` says what
    FSDP2 does to the graphs, its collectives and each rank's memory."""
    shared.check_aot_backend(backend)
    if cudagraphs:
        from graphtool.analysis.cudagraphs.verdict import check_cudagraph_backend

        check_cudagraph_backend(cudagraphs)
    results = []
    if ddp is not None:
        shared.check_ddp(ddp, device)
    if fsdp2 is not None:
        shared.check_fsdp2(fsdp2, ddp, device)
    for target, ent in shared.targets(model, entry):
        # the script runs once: the stand-in, the host-value replay and the bench derive from that one model
        once = shared.one_load(standin=bool(cudagraphs), plain=bench and (ddp is not None or fsdp2 is not None))
        with once if cudagraphs or bench else contextlib.nullcontext():  # one trace alone needs no sharing
            results.append(_one(target, ent, device, inference, backend, cudagraphs, bench, graph_code, debug, progress,
                                ddp, fsdp2))
    return results


def _one(target, ent, device, inference, backend, cudagraphs, bench, graph_code, debug, progress, ddp, fsdp2):
    from graphtool.analysis.trace_report import build_trace_report

    ddp_report = fsdp2_report = None
    if fsdp2 is not None:
        capture, fsdp2_report = _trace_under_fsdp2(target, ent, device, inference, backend, fsdp2, debug, progress)
    elif ddp is not None:
        capture, ddp_report = _trace_under_ddp(target, ent, device, inference, backend, ddp, debug, progress)
    else:
        capture = shared.trace_own_device(target, ent, device, inference, backend=backend, debug=debug, progress=progress)
    verdict = timings = code = None
    if cudagraphs:
        from dataclasses import replace

        from graphtool.analysis.cudagraphs.verdict import cudagraph_verdict
        from graphtool.analysis.steady_state import steady_state
        from graphtool.capture.steady_state import DEFAULT_STEPS

        if ddp is not None:  # the split graphs' verdict, from the stand-in run under DDP too
            standin, accel, standin_ddp = shared.standin_under_ddp(target, ent, device, inference, cudagraphs, ddp,
                                                            debug=debug, progress=progress, n_steps=DEFAULT_STEPS)
        elif fsdp2 is not None:  # each block graph's verdict, from the stand-in run under FSDP2 too
            standin, accel, standin_fsdp2 = shared.standin_under_fsdp2(target, ent, device, inference, cudagraphs,
                                                                      fsdp2, debug=debug, progress=progress,
                                                                      n_steps=DEFAULT_STEPS)
        else:
            standin, accel = shared.trace_standin(target, ent, device, inference, backend=cudagraphs, debug=debug,
                                                 progress=progress, steps=DEFAULT_STEPS)
        verdict = cudagraph_verdict(standin, backend=cudagraphs, predicted=accel == "meta")
        verdict = replace(verdict, steady=steady_state(standin, verdict))
        if ddp is not None:
            from graphtool.analysis.cudagraphs.ddp import with_split_verdicts

            ddp_report = with_split_verdicts(ddp_report, verdict, standin=standin_ddp)
        if fsdp2 is not None:
            from graphtool.analysis.cudagraphs.fsdp2 import with_graph_verdicts

            fsdp2_report = with_graph_verdicts(fsdp2_report, verdict, standin, standin=standin_fsdp2)
    if bench:
        timings = shared.eager_vs_compiled(target, ent, progress=progress)
    if graph_code:
        from graphtool.render.graph_code import graph_files

        code = {path.name: text for path, text in graph_files(capture, Path(".")).items()}
    return TraceResult(target, build_trace_report(capture), verdict, timings, code, ddp_report, fsdp2_report)


def _trace_under_ddp(target, entry, device, inference, backend, ddp: dict, debug, progress):
    from dataclasses import replace

    from graphtool.analysis.distributed.wrappers import build_ddp_report
    from graphtool.commands.ranks import rank_differences

    world = ddp["world_size"]
    progress.phase("starting a fake process group for DDP...")
    capture, session, factory, factory_args = _ddp_rank(target, entry, device, inference, backend, ddp, debug, progress, 0)
    report = build_ddp_report(capture, session.result(capture))

    def trace_rank(rank):
        with shared.own_load():  # rank ``rank``'s model, built as its process builds it: the script runs again
            return _ddp_rank(target, entry, device, inference, backend, ddp, debug, progress, rank)[0]

    ranks = rank_differences(target, factory, factory_args, world, capture, trace_rank, progress)
    return capture, replace(report, ranks=ranks)


def _ddp_rank(target, entry, device, inference, backend, ddp: dict, debug, progress, rank: int):
    """One rank's trace under DDP in the fake process group: (capture, session, entry, factory args)."""
    from graphtool.capture.distributed.ranks import launch_env, on_rank

    world = ddp["world_size"]
    # the group's progress line is _trace_under_ddp's, once for every rank traced
    with on_rank(rank, world), launch_env(rank, world), shared.ddp_session(ddp, rank=rank) as session:
        with shared.own_group_hint("--ddp"):
            entry, factory_args = session.entry(target, entry)
            # two steps: DDP fails on the second when a parameter got no gradient in the first
            capture = shared.trace_own_device(target, entry, device, inference, backend=backend, debug=debug,
                                             progress=progress, wrapper=session, factory_args=factory_args,
                                             steps=DDP_STEPS)
        return capture, session, entry, factory_args


def _trace_under_fsdp2(target, entry, device, inference, backend, fsdp2: dict, debug, progress):
    from graphtool.analysis.distributed.wrappers import build_fsdp2_report

    with shared.fsdp2_session(fsdp2, progress) as session, shared.own_group_hint("--fsdp2"):
        entry, factory_args = session.entry(target, entry)
        capture = shared.trace_own_device(target, entry, device, inference, backend=backend, debug=debug,
                                         progress=progress, wrapper=session, factory_args=factory_args)
        return capture, build_fsdp2_report(capture, session.result(capture))


#: the steps ``trace --ddp`` runs: the second is where DDP fails on parameters without gradient
DDP_STEPS = 2
