"""``graphtool memory``: what training keeps for backward, eager autograd beside the compiled graphs.

The script is loaded once. Its forward runs eagerly under ``saved_tensors_hooks`` (the eager
column), then the same model is traced with the chosen backend's AOT stage (the compiled column:
the saved inputs of each backward graph). With ``--device meta`` both run on the meta device, so a
model too big for this machine is analysed with no weights in memory.

Example::

    >>> (r,) = memory("examples/mlp.py")
    >>> r.report.compiled.by_kind["activation"]
    (2048, 1)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from graphtool.commands import shared
from graphtool.commands.launch import Launch, launch_of
from graphtool.commands.progress import SILENT, Progress

BY = ("line", "module", "op")


@dataclass(frozen=True, repr=False)
class MemoryResult(shared.ModelResult):
    """One model's MemoryReport; ``rank`` what each rank holds (``--ddp``/``--fsdp2``), ``fit`` whether the
    step fits (``--fit``/``--budgets``); ``top``: rows per table of the terminal view."""

    command = "memory"
    key = "memory"

    top: int = 10

    def view(self):
        """The report's tables, then what each rank holds and whether the step fits (no captured-graph line:
        the memory view says what was saved either way)."""
        from rich.console import Group

        from graphtool.render.memory import memory_view

        parts = [memory_view(self.report, top=self.top)]
        if self.rank is not None:
            from graphtool.render.rank_memory import rank_memory_view

            wrapped = self.fsdp2 or self.ddp
            parts.append(rank_memory_view(self.rank, world_size=wrapped.world_size if wrapped else None,
                                          wrapper="FSDP2" if self.fsdp2 is not None else "DDP"))
        if self.fit is not None:
            from graphtool.render.fit import fit_view

            parts.append(fit_view(self.fit))
        return Group(*parts)

    def _findings(self) -> str:
        return ""  # the page's memory section is all tables: nothing to list under Findings

    def sections(self) -> list[str]:
        from graphtool.render.report import fit_section, memory_section

        return [memory_section(self.report)] + ([fit_section(self.fit)] if self.fit is not None else [])


def memory(model: Optional[str] = None, *, entry: Optional[str] = None, device: Optional[str] = None,
           backend: str = "inductor", by: str = "line", depth: Optional[int] = None, top: int = 10,
           dynamic: bool = False, debug: bool = False, progress: Progress = SILENT,
           ddp: Optional[dict] = None, fsdp2: Optional[dict] = None, fit: Optional[str] = None,
           budgets: Optional[str] = None) -> list[MemoryResult]:
    """One :class:`MemoryResult` (a MemoryReport, key ``memory``) per model; ``found`` is never set.

    ``by`` groups activations per ``line``, ``module`` (cut to ``depth`` levels) or ``op``;
    ``dynamic`` traces the input sizes that differ from the script's ``dynamic_inputs`` (else the
    batch) as symbols, so each saved tensor's bytes is also a formula of them. ``ddp`` (``world_size``,
    ``bucket_cap_mb``, ``find_unused_parameters``): the step runs as ``DDP(torch.compile(model))`` in a
    fake process group (as rank 0 of ``world_size``), and the result's ``rank`` (a
    :class:`~graphtool.analysis.memory.rank_memory.RankMemory`) says what each rank holds. ``fsdp2``
    (``world_size``): the step runs under ``fully_shard`` per block and root as rank 0 of a fake
    process group; ``rank`` is the busiest rank's RankMemory with every rank in ``per_rank``, and
    ``fsdp2`` the FSDP2 report (units, collectives, each rank's shards). ``fit`` (a size such as ``24GiB`` or a
    GPU name) and ``budgets`` (``"1,0.5,0.1"``, or ``""`` for the default sweep): the result's ``fit`` (a
    :class:`~graphtool.analysis.memory.fit_report.FitReport`) predicts the training step's peak, eager beside compiled,
    and at each activation-memory budget (:mod:`graphtool.commands.fit`)."""
    from graphtool.errors import UsageError

    shared.check_aot_backend(backend)
    if by not in BY:
        raise UsageError(f"--by {by!r} is not one of {', '.join(BY)}")
    if depth is not None and depth < 1:
        raise UsageError(f"--depth {depth}: count levels from 1 (the model's children)")
    if fit is not None or budgets is not None:
        from graphtool.commands.fit import check_fit

        check_fit(fit, budgets, ddp=ddp, fsdp2=fsdp2, dynamic=dynamic)
    launch = launch_of(ddp, fsdp2, device)
    launch.check("memory", dynamic=dynamic)
    return [_one(target, ent, device, backend, by, depth, top, dynamic, debug, progress, launch, fit, budgets)
            for target, ent in shared.targets(model, entry)]


def _one(target, ent, device, backend, by, depth, top, dynamic, debug, progress, launch: Launch, fit, budgets):
    """The memory report of one model: its forward run eagerly under ``saved_tensors_hooks``, then traced under the
    launch (``--ddp``: what one rank holds, DDP's bucket bytes from torch's own figures and the optimizer state of
    the script's ``get_optimizer``; ``--fsdp2``: each rank's shards, gradients, optimizer state, all-gathered
    parameters and the activations the compiled graphs save, each graph once per call in the step)."""
    from graphtool.analysis.memory.saved import build_memory_report
    from graphtool.capture.memory.saved_tensors import capture_saved, mark_varying_sizes
    from graphtool.capture.tracer import trace_model
    from graphtool.commands.fit import recording

    with launch.opened(target, ent, progress) as run:
        spec = shared.load(target, run.entry, device, progress, run.factory_args, wrapped=launch.wrapped)
        progress.phase("running the forward eagerly, recording what autograd saves...")
        with shared.quiet_stdout():
            eager = capture_saved(spec)
        notes: tuple[str, ...] = ()
        if dynamic:
            varying = mark_varying_sizes(spec)
            notes = (f"--dynamic: symbolic sizes for {', '.join(varying)}; bytes at the example inputs' sizes"
                     if varying else "--dynamic: no input size differs between the example inputs and their variant",)
        progress.phase(f"tracing{launch.under} with dynamo + {backend}'s AOT stage...")
        with shared.quiet_stdout(), recording(fit, budgets) as joints:
            capture = trace_model(spec, backend=backend, record_breaks=launch.record_memory_breaks, quiet=not debug,
                                  wrapper=run.session, on_region=lambda i: progress.phase(f"tracing region {i}..."))
            held = launch.held(run, spec)
        wrapped = launch.report(run, capture)
    report = build_memory_report(eager, capture, by=by, depth=depth, top=top, notes=notes)
    fitted = None
    if fit is not None or budgets is not None:
        from graphtool.commands.fit import fit_report

        fitted = fit_report(spec, report, capture, joints, fit, budgets, progress)
    return MemoryResult(shared.model_header(capture), report, False, fit=fitted, top=top,
                        rank=launch.rank_memory(report, wrapped, capture, held), **launch.fields(wrapped))
