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
        from graphtool.render.report import memory_section

        return [memory_section(self.report)]


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
    if fsdp2 is not None:
        shared.check_fsdp2(fsdp2, ddp, device)
        if dynamic:
            raise UsageError("memory --fsdp2 with --dynamic: not supported yet", hint="drop --dynamic")
        return [_under_fsdp2(target, ent, device, backend, by, depth, top, debug, progress, fsdp2)
                for target, ent in shared.targets(model, entry)]
    if ddp is not None:
        shared.check_ddp(ddp, device)
        if dynamic:
            raise UsageError("memory --ddp with --dynamic: not supported yet", hint="drop --dynamic")
        return [_under_ddp(target, ent, device, backend, by, depth, top, debug, progress, ddp)
                for target, ent in shared.targets(model, entry)]
    results = []
    for target, ent in shared.targets(model, entry):
        spec = shared.load(target, ent, device, progress)
        from graphtool.analysis.memory.saved import build_memory_report
        from graphtool.capture.memory.saved_tensors import capture_saved, mark_varying_sizes
        from graphtool.capture.tracer import trace_model

        progress.phase("running the forward eagerly, recording what autograd saves...")
        with shared.quiet_stdout():
            eager = capture_saved(spec)
        notes: tuple[str, ...] = ()
        if dynamic:
            varying = mark_varying_sizes(spec)
            notes = (f"--dynamic: symbolic sizes for {', '.join(varying)}; bytes at the example inputs' sizes"
                     if varying else "--dynamic: no input size differs between the example inputs and their variant",)
        progress.phase(f"tracing with dynamo + {backend}'s AOT stage...")
        from graphtool.commands.fit import recording

        with shared.quiet_stdout(), recording(fit, budgets) as joints:
            capture = trace_model(spec, backend=backend, record_breaks=False, quiet=not debug,
                                  on_region=lambda i: progress.phase(f"tracing region {i}..."))
        report = build_memory_report(eager, capture, by=by, depth=depth, top=top, notes=notes)
        fitted = None
        if fit is not None or budgets is not None:
            from graphtool.commands.fit import fit_report

            fitted = fit_report(spec, report, capture, joints, fit, budgets, progress)
        results.append(MemoryResult(shared.model_header(capture), report, False, fit=fitted, top=top))
    return results


def _under_ddp(target, ent, device, backend, by, depth, top, debug, progress, ddp: dict) -> MemoryResult:
    """The memory report of one model run as ``DDP(torch.compile(model))``, with what one rank holds:
    DDP's bucket bytes from torch's own figures and the optimizer state of the script's ``get_optimizer``."""
    from graphtool.analysis.distributed.wrappers import build_ddp_report
    from graphtool.analysis.memory.rank_memory import ddp_rank_memory
    from graphtool.analysis.memory.saved import build_memory_report
    from graphtool.capture import compat
    from graphtool.capture.memory.optimizer_state import optimizer_state_bytes
    from graphtool.capture.memory.saved_tensors import capture_saved
    from graphtool.capture.tracer import trace_model

    with shared.ddp_session(ddp, progress) as session:
        with shared.own_group_hint("--ddp"):
            ent, factory_args = session.entry(target, ent)
            spec = shared.load(target, ent, device, progress, factory_args)
            progress.phase("running the forward eagerly, recording what autograd saves...")
            with shared.quiet_stdout():
                eager = capture_saved(spec)
            progress.phase(f"tracing under DDP with dynamo + {backend}'s AOT stage...")
            with shared.quiet_stdout():
                capture = trace_model(spec, backend=backend, record_breaks=False, quiet=not debug, wrapper=session,
                                      on_region=lambda i: progress.phase(f"tracing region {i}..."))
                optimizer = optimizer_state_bytes(spec)
        buckets = compat.ddp_bucket_sizes(session.ddp) if session.ddp is not None else None
        ddp_report = build_ddp_report(capture, session.result(capture))
    report = build_memory_report(eager, capture, by=by, depth=depth, top=top)
    rank = ddp_rank_memory(report, buckets, optimizer)
    return MemoryResult(shared.model_header(capture), report, False, ddp=ddp_report, rank=rank, top=top)


def _under_fsdp2(target, ent, device, backend, by, depth, top, debug, progress, fsdp2: dict) -> MemoryResult:
    """The memory report of one model run under FSDP2 (``fully_shard`` per block and root,
    ``torch.compile(model)``) as rank 0 of a fake group, with what each rank holds: its shards, its
    gradients and optimizer state (the script's ``get_optimizer``), the all-gathered parameters and the
    activations the compiled graphs save, each graph once per call in the step."""
    from graphtool.analysis.cudagraphs.fsdp2 import runs_per_step
    from graphtool.analysis.distributed.wrappers import SKIPPED_ROOT_NOTE, build_fsdp2_report
    from graphtool.analysis.memory.rank_memory import fsdp2_rank_memory
    from graphtool.analysis.memory.saved import build_memory_report
    from graphtool.capture.memory.saved_tensors import capture_saved
    from graphtool.capture.tracer import trace_model

    with shared.fsdp2_session(fsdp2, progress) as session, shared.own_group_hint("--fsdp2"):
        ent, factory_args = session.entry(target, ent)
        spec = shared.load(target, ent, device, progress, factory_args)
        progress.phase("running the forward eagerly, recording what autograd saves...")
        with shared.quiet_stdout():
            eager = capture_saved(spec)
        progress.phase(f"tracing under FSDP2 with dynamo + {backend}'s AOT stage...")
        with shared.quiet_stdout():
            capture = trace_model(spec, backend=backend, quiet=not debug, wrapper=session,
                                  on_region=lambda i: progress.phase(f"tracing region {i}..."))
        fsdp2_report = build_fsdp2_report(capture, session.result(capture))
    report = build_memory_report(eager, capture, by=by, depth=depth, top=top)
    rank = fsdp2_rank_memory(report, fsdp2_report.memory, runs_per_step(capture), world_size=fsdp2["world_size"],
                             root_eager=SKIPPED_ROOT_NOTE in fsdp2_report.notes)
    return MemoryResult(shared.model_header(capture), report, False, fsdp2=fsdp2_report, rank=rank, top=top)
