"""``graphtool cudagraphs``: would CUDA graphs be applied to each model, and if not, why.

Example::

    >>> cudagraphs("examples/mlp.py")[0].report.eligible
    True
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Optional

from graphtool.commands import shared
from graphtool.commands.launch import launch_of
from graphtool.commands.progress import SILENT, Progress


@dataclass(frozen=True, repr=False)
class CudagraphsResult(shared.ModelResult):
    """One model's Verdict; ``ddp`` or ``fsdp2`` the split or block graphs, each with its verdict."""

    command = "cudagraphs"
    key = "cudagraphs"

    def summary(self) -> str:
        return self.report.summary()

    def body(self):
        """The verdict, then (``--ddp``) the split graphs or (``--fsdp2``) the compiled block graphs, each with its verdict."""
        from rich.console import Group

        from graphtool.render.cudagraphs import cudagraphs_view

        view = cudagraphs_view(self.report, self.stopped)
        if self.shapes is not None:
            from graphtool.render.shapes import shapes_view

            view = Group(view, shapes_view(self.shapes))
        if self.fsdp2 is not None:
            from graphtool.render.distributed import fsdp2_view

            return Group(view, fsdp2_view(self.fsdp2))
        if self.ddp is not None:
            from graphtool.render.distributed import ddp_view

            return Group(view, ddp_view(self.ddp))
        return view

    def diagnostics(self) -> str:
        """Each reason torch would skip CUDA graphs for, as a diagnostic."""
        from rich.console import Group

        from graphtool.render.cudagraphs import diagnostic
        from graphtool.render.plain import format_plain

        return format_plain(Group(*[diagnostic(r) for r in self.report.reasons if r.skips]), 0)

    def sections(self) -> list[str]:
        from graphtool.render.report import cudagraphs_section, shapes_section

        return [cudagraphs_section(self.report)] + ([shapes_section(self.shapes)] if self.shapes is not None else [])


def cudagraphs(model: Optional[str] = None, *, entry: Optional[str] = None, device: Optional[str] = None,
               inference: bool = False, backend: str = "inductor", dynamic: bool = False, debug: bool = False,
               settings: Sequence[str] = (), progress: Progress = SILENT, steps: int = 3,
               ddp: Optional[dict] = None, fsdp2: Optional[dict] = None, schedule=False) -> list[CudagraphsResult]:
    """One :class:`CudagraphsResult` (a Verdict) per model; ``found`` when a reason makes torch skip.

    ``settings`` (``["graph_partition=false"]``) override the installed torch's inductor and dynamo
    config for the verdict; they are checked before any tracing. ``steps``: the model's step runs that
    many times, as a loop would; the verdict's ``steady`` says what each step compiled and recorded.
    ``ddp`` (``world_size``, ``bucket_cap_mb``): the steps run as ``DDP(torch.compile(model))``, each graph
    DDP's optimizer splits off is one region, and the result's ``ddp`` gives each one's verdict. ``fsdp2``
    (``world_size``): the steps run under ``fully_shard`` per block and root, ``torch.compile(model)``, as
    rank 0 of a fake process group over the meta stand-in; the result's ``fsdp2`` gives each compiled
    graph's verdict and how many times a step runs it. ``schedule``: also predict the loop over the script's
    ``get_input_schedule()`` (True; or the model's inputs per step, an iterable, as ``graphtool.shapes`` takes them),
    as ``graphtool shapes`` does, from the same load: the result's ``shapes``."""
    from graphtool.analysis.cudagraphs.verdict import check_cudagraph_backend, parse_settings
    from graphtool.capture.steady_state import check_steps

    check_cudagraph_backend(backend)
    overrides = parse_settings(settings)
    n_steps = check_steps(steps)
    launch = launch_of(ddp, fsdp2, device)
    if schedule is not False:
        from graphtool.commands.shapes import refuse_schedule_under

        refuse_schedule_under(launch)
    results = []
    for target, ent in shared.targets(model, entry):
        with shared.one_load(standin=True) if schedule is not False else contextlib.nullcontext():
            results.append(_one(target, ent, device, inference, backend, dynamic, debug, progress, n_steps, launch,
                                overrides, settings, schedule))
    return results


def _one(target, ent, device, inference, backend, dynamic, debug, progress, n_steps, launch, overrides, settings,
         schedule) -> CudagraphsResult:
    from dataclasses import replace

    from graphtool.analysis.cudagraphs.verdict import cudagraph_verdict
    from graphtool.analysis.steady_state import steady_state

    capture, accel, wrapped = launch.standin(target, ent, device, inference, backend, dynamic=dynamic, debug=debug,
                                             progress=progress, n_steps=n_steps)
    verdict = cudagraph_verdict(capture, backend=backend, predicted=accel == "meta", settings=overrides)
    verdict = replace(verdict, steady=steady_state(capture, verdict))
    found = any(r.skips for r in verdict.reasons) or bool(capture.no_graph) or not verdict.eligible
    found = found or launch.fails(wrapped)  # under DDP: a loop fails at its second step
    extra = launch.fields(launch.judged(wrapped, verdict, capture))
    shapes = None
    if schedule is not False:
        from graphtool.commands.shapes import over_schedule

        over = over_schedule(target, ent, device, progress, inference=inference, backend=backend, settings=settings,
                             given=None if schedule is True else schedule)
        shapes = over.report
        found = found or over.found
    return CudagraphsResult(shared.model_header(capture), verdict, found, stopped=capture.stopped, shapes=shapes,
                            **extra)
