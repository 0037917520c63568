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
    ddp: Any = None  # DdpReport: what DDP(torch.compile(model)) does to the graphs (``--ddp``)

    def to_dict(self) -> dict:
        data = self.report.to_dict()
        if self.verdict is not None:
            data["cudagraphs"] = self.verdict.to_dict()
        if self.bench is not None:
            data["bench"] = self.bench.to_dict()
        if self.ddp is not None:
            data["ddp"] = self.ddp.to_dict()
        return data


def trace(model: Optional[str] = None, *, entry: Optional[str] = None, device: Optional[str] = None,
          inference: bool = False, backend: str = "inductor", cudagraphs: Optional[str] = None, bench: bool = False,
          graph_code: bool = False, debug: bool = False, progress: Progress = SILENT,
          ddp: Optional[dict] = None) -> list[TraceResult]:
    """Trace every model with ``backend``'s AOT stage; ``cudagraphs`` (a backend) adds the verdict,
    ``bench`` the timings, ``graph_code`` each graph's readable source. ``ddp`` (``world_size``,
    ``bucket_cap_mb``) runs the model as ``DDP(torch.compile(model))``: each graph DDP's optimizer
    splits off is one region, and the result's ``ddp`` says where and why."""
    from graphtool.analysis.trace_report import build_trace_report

    steps.check_backend(backend)
    if cudagraphs:
        from graphtool.analysis.cudagraphs import check_backend

        check_backend(cudagraphs)
    results = []
    if ddp is not None:
        from graphtool.capture.distributed import check_world_size
        from graphtool.errors import UsageError

        check_world_size(ddp["world_size"])
        if device == "meta":
            raise UsageError("--ddp cannot run on --device meta: DDP's constructor reads the parameters' values "
                             "(it broadcasts them from rank 0)", hint="drop --device meta; a smaller config of the model splits the same way per layer")
        if cudagraphs:
            raise UsageError("--ddp with --cudagraphs: the CUDA-graph verdict of the split graphs is not computed yet",
                             hint="run `graphtool cudagraphs MODEL` for the unsplit graphs")
    for target, ent in steps.targets(model, entry):
        ddp_report = None
        if ddp is not None:
            capture, ddp_report = _trace_under_ddp(target, ent, device, inference, backend, ddp, debug, progress)
        else:
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
        results.append(TraceResult(target, build_trace_report(capture), verdict, timings, code, ddp_report))
    return results


def _trace_under_ddp(target, entry, device, inference, backend, ddp: dict, debug, progress):
    from dataclasses import replace

    from graphtool.analysis.distributed import build_ddp_report
    from graphtool.commands.ranks import rank_differences

    world = ddp["world_size"]
    progress.phase("starting a fake process group for DDP...")
    capture, session, factory, factory_args = _ddp_rank(target, entry, device, inference, backend, ddp, debug, progress, 0)
    report = build_ddp_report(capture, session.result(capture))

    def trace_rank(rank):
        return _ddp_rank(target, entry, device, inference, backend, ddp, debug, progress, rank)[0]

    ranks = rank_differences(target, factory, factory_args, world, capture, trace_rank, progress)
    return capture, replace(report, ranks=ranks)


def _ddp_rank(target, entry, device, inference, backend, ddp: dict, debug, progress, rank: int):
    """One rank's trace under DDP in the fake process group: (capture, session, entry, factory args)."""
    from graphtool.capture.distributed import DdpSession
    from graphtool.capture.ranks import launch_env, on_rank
    from graphtool.errors import UserScriptError

    world = ddp["world_size"]
    with on_rank(rank, world), launch_env(rank, world), \
            DdpSession(world_size=world, bucket_cap_mb=ddp["bucket_cap_mb"], rank=rank) as session:
        try:
            entry, factory_args = session.entry(target, entry)
            capture = steps.trace_own_device(target, entry, device, inference, backend=backend, debug=debug,
                                             progress=progress, wrapper=session, factory_args=factory_args)
        except UserScriptError as exc:
            if "process group" in exc.message and not exc.hint:
                raise exc.with_hint(OWN_GROUP_HINT) from None
            raise
        return capture, session, entry, factory_args


#: a script that starts its own process group under --ddp
OWN_GROUP_HINT = ("with --ddp graphtool starts the process group itself: start yours only when run as a program "
                  "(under `if __name__ == \"__main__\":`), or only `if not torch.distributed.is_initialized()`")
