"""``graphtool cudagraphs``: would CUDA graphs be applied to each model, and if not, why.

Example::

    >>> cudagraphs("examples/mlp.py")[0].report.eligible
    True
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from graphtool.commands.result import ModelResult, model_header
from graphtool.commands.session import per_model

if TYPE_CHECKING:
    from graphtool.analysis.cudagraphs.verdict import Verdict


@dataclass(frozen=True, repr=False)
class CudagraphsResult(ModelResult):
    """One model's Verdict; ``ddp`` or ``fsdp2`` the split or block graphs, each with its verdict."""

    report: Verdict

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
        return Group(view, *self._wrapped("view")) if self.wrapped is not None else view

    def diagnostics(self) -> str:
        """Each reason torch would skip CUDA graphs for, as a diagnostic."""
        from rich.console import Group

        from graphtool.render.cudagraphs import diagnostic
        from graphtool.render.plain import format_plain

        return format_plain(Group(*[diagnostic(r) for r in self.report.reasons if r.skips]), 0)

    def sections(self) -> list[str]:
        from graphtool.render.report import cudagraphs_section, shapes_section

        return [cudagraphs_section(self.report)] + ([shapes_section(self.shapes)] if self.shapes is not None else [])


cudagraphs = per_model("cudagraphs")


def run(session, *, backend: str, dynamic: bool, settings: Sequence[str], steps: int,
        schedule) -> CudagraphsResult:
    """The session's verdict (:meth:`~graphtool.commands.session.Session.verdict`: the stand-in run ``steps`` times as
    a loop would, under the launch; ``--ddp``: each split graph's verdict, ``--fsdp2``: each compiled graph's and how
    many times a step runs it); ``found`` when a reason makes torch skip. ``settings`` (``["graph_partition=false"]``)
    override the installed torch's inductor and dynamo config for the verdict. ``schedule``: also predict the loop
    over the script's ``get_input_schedule()`` (True; or the model's inputs per step, an iterable), as ``graphtool
    shapes`` does, from the same load: the result's ``shapes``."""
    from graphtool.analysis.cudagraphs.verdict import check_cudagraph_backend, parse_settings
    from graphtool.capture.steady_state import check_steps

    check_cudagraph_backend(backend)
    parse_settings(settings)  # checked before any tracing
    check_steps(steps)
    session.launch.check("cudagraphs", schedule=schedule is not False)
    verdict, capture, _accel, wrapped = session.verdict(backend, steps, dynamic, tuple(settings))
    found = any(r.skips for r in verdict.reasons) or bool(capture.no_graph) or not verdict.eligible
    part = session.launch.part(session.launch.judged(wrapped, verdict, capture))
    found = found or bool(part is not None and part.fails)  # under DDP: a loop fails at its second step
    shapes = None
    if schedule is not False:
        session.progress.phase("predicting the loop over its shape schedule...")
        over = session.shapes(schedule=None if schedule is True else schedule, backend=backend, settings=tuple(settings),
                              advise=False)
        shapes, found = over.report, found or over.found
    return CudagraphsResult(model_header(capture), verdict, found, stopped=capture.stopped, shapes=shapes, wrapped=part)

