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
from typing import TYPE_CHECKING, Optional

from graphtool.commands.progress import quiet_stdout
from graphtool.commands.result import ModelResult, model_header
from graphtool.commands.session import per_model

if TYPE_CHECKING:
    from graphtool.analysis.memory.saved import MemoryReport

BY = ("line", "module", "op")


@dataclass(frozen=True, repr=False)
class MemoryResult(ModelResult):
    """One model's MemoryReport; ``rank`` what each rank holds (``--ddp``/``--fsdp2``), ``fit`` whether the
    step fits (``--fit``/``--budgets``); ``top``: rows per table of the terminal view."""

    report: MemoryReport

    command = "memory"
    key = "memory"

    top: int = 10

    def view(self):
        """The report's tables, then what each rank holds and whether the step fits (no captured-graph line:
        the memory view says what was saved either way)."""
        from rich.console import Group

        from graphtool.render.memory import memory_view

        parts = [memory_view(self.report, top=self.top)]
        if self.rank is not None:  # what one rank holds under the launch's wrapper
            from graphtool.render.rank_memory import rank_memory_view

            parts.append(rank_memory_view(self.rank, world_size=self.wrapped.world_size, wrapper=self.wrapped.label))
        if self.fit is not None:
            from graphtool.render.fit import fit_view

            parts.append(fit_view(self.fit))
        return Group(*parts)

    def _findings(self) -> str:
        return ""  # the page's memory section is all tables: nothing to list under Findings

    def sections(self) -> list[str]:
        from graphtool.render.report import fit_section, memory_section

        return [memory_section(self.report)] + ([fit_section(self.fit)] if self.fit is not None else [])


memory = per_model("memory")


def run(session, *, by: str, depth: Optional[int], top: int, dynamic: bool,
        schedule: bool, fit: Optional[str], budgets: Optional[str]) -> MemoryResult:
    """One :class:`MemoryResult` (a MemoryReport, key ``memory``); ``found`` is never set.

    ``by`` groups activations per ``line``, ``module`` (cut to ``depth`` levels) or ``op``; ``dynamic`` traces the
    input sizes that differ from the script's ``dynamic_inputs`` (else the batch) as symbols, so each saved tensor's
    bytes is also a formula of them. Under ``--ddp`` the step runs as ``DDP(torch.compile(model))`` as rank 0 of a
    fake process group, and the result's ``rank`` (a :class:`~graphtool.analysis.memory.rank_memory.RankMemory`) says
    what each rank holds; under ``--fsdp2`` it runs under ``fully_shard``, ``rank`` is the busiest rank's with every
    rank in ``per_rank``. ``fit`` (a size such as ``24GiB`` or a GPU name) and ``budgets`` (``"1,0.5,0.1"``, or
    ``""`` for the default sweep): the result's ``fit`` (a :class:`~graphtool.analysis.memory.fit_report.FitReport`)
    predicts the training step's peak, eager beside compiled, and at each activation-memory budget
    (:mod:`graphtool.commands.fit`). ``schedule``: measure at the largest step of the script's
    ``get_input_schedule()`` (the most input elements) instead of the example inputs, and say what the CUDA graphs
    recorded at that size hold in cudagraph trees' pool (the report's notes)."""
    from graphtool.errors import UsageError

    if by not in BY:
        raise UsageError(f"--by {by!r} is not one of {', '.join(BY)}")
    if depth is not None and depth < 1:
        raise UsageError(f"--depth {depth}: count levels from 1 (the model's children)")
    if session.inference:
        raise UsageError("memory measures a training step: this session traces the forward only (inference)",
                         hint="load the model without inference=True")
    launch = session.launch
    if fit is not None or budgets is not None:
        from graphtool.commands.fit import check_fit

        check_fit(fit, budgets, launch=launch, dynamic=dynamic)
    launch.check("memory", dynamic=dynamic)
    for flag, given in (("--dynamic", dynamic), ("--ddp/--fsdp2", launch.wrapped)):
        if schedule and given:
            raise UsageError(f"memory --schedule with {flag}: not supported yet", hint=f"drop {flag}")
    return _one(session, by, depth, top, dynamic, fit, budgets, schedule)


def _largest_step(spec):
    """``(spec at the schedule's largest step, note)``: the step whose inputs hold the most elements."""
    import dataclasses

    from graphtool.capture.schedule import script_schedule
    from graphtool.capture.tensors import iter_tensors
    from graphtool.errors import UsageError

    found = script_schedule(spec)
    if found is None:
        raise UsageError(f"{spec.path}: memory --schedule: the script has no get_input_schedule()",
                         hint="define get_input_schedule() yielding the model's inputs for each step, or drop --schedule")
    sizes = [sum(t.numel() for t in iter_tensors((args, kwargs))) for args, kwargs in found.steps]
    k = max(range(len(sizes)), key=lambda i: sizes[i])
    args, kwargs = found.steps[k]
    label = " ".join(f"{name}={n}" for name, n in found.labels[k].items()) if k < len(found.labels) else ""
    from graphtool.display_paths import display_site

    note = (f"measured at step {k + 1} of {len(found.steps)} of {display_site(found.source)}, the largest"
            + (f" ({label})" if label else "") + ", not at the example inputs")
    return dataclasses.replace(spec, args=tuple(args), kwargs=dict(kwargs)), note


def _pool_note(capture) -> str | None:
    """What the CUDA graphs recorded at this size hold in cudagraph trees' pool, forward and backward."""
    from graphtool.analysis.cudagraphs.pool import recording_bytes, region_graphs
    from graphtool.analysis.memory.saved import format_bytes

    bits = []
    for r in capture.regions:
        for graph, _gm in region_graphs(r):
            _own, live = recording_bytes(capture, r.index, graph, ())
            if live is not None:
                bits.append(f"region {r.index} {graph} {format_bytes(live)}")
    if not bits:
        return None
    return ("under reduce-overhead, right after recording at this size, cudagraph trees' pool holds: " + ", ".join(bits)
            + " (each recording's live outputs; the pool also keeps warm-ups and cuBLAS's workspace: docs/gpu-results.md)")


def _one(session, by, depth, top, dynamic, fit, budgets, schedule=False):
    """The memory report of one model: its forward run eagerly under ``saved_tensors_hooks``, then traced under the
    launch (``--ddp``: what one rank holds, DDP's bucket bytes from torch's own figures and the optimizer state of
    the script's ``get_optimizer``; ``--fsdp2``: each rank's shards, gradients, optimizer state, all-gathered
    parameters and the activations the compiled graphs save, each graph once per call in the step). Alone, on the
    example inputs, the trace is the session's own-device trace, shared with ``trace`` and ``mutations``."""
    from graphtool.analysis.memory.saved import build_memory_report
    from graphtool.capture.memory.saved_tensors import capture_saved, mark_varying_sizes
    from graphtool.commands.fit import recording

    launch, progress = session.launch, session.progress
    with launch.opened(session) as run:
        spec = session.spec(entry=run.entry, factory_args=run.factory_args, wrapped=launch.wrapped)
        notes: tuple[str, ...] = ()
        if schedule:
            spec, note = _largest_step(spec)
            notes += (note,)
        progress.phase("running the forward eagerly, recording what autograd saves...")
        with quiet_stdout():
            eager = capture_saved(spec)
        if dynamic:
            varying = mark_varying_sizes(spec)
            notes += (f"--dynamic: symbolic sizes for {', '.join(varying)}; bytes at the example inputs' sizes"
                      if varying else "--dynamic: no input size differs between the example inputs and their variant",)
        if launch.shares_own_trace and not (dynamic or schedule or budgets is not None):
            capture, wrapped, held, joints = *session.own_trace()[:2], None, []
        else:
            progress.phase(f"tracing{launch.under} with dynamo + {session.backend}'s AOT stage...")
            with recording(fit, budgets) as joints:
                capture = session.trace_spec(spec, inference=False, record_breaks=launch.record_memory_breaks,
                                             wrapper=run.session)
                held = launch.held(run, spec)
            wrapped = launch.report(run, capture)
    if schedule:
        pool = _pool_note(capture)
        notes += (pool,) if pool else ()
    report = build_memory_report(eager, capture, by=by, depth=depth, top=top, notes=notes)
    fitted = None
    if fit is not None or budgets is not None:
        from graphtool.commands.fit import fit_report

        fitted = fit_report(spec, report, capture, joints, fit, budgets, progress)
    return MemoryResult(model_header(capture), report, False, fit=fitted, top=top,
                        rank=launch.rank_memory(report, wrapped, capture, held), wrapped=launch.part(wrapped))
