"""``graphtool memory --fit SIZE|GPU --budgets [LIST]``: will the training step fit, and at what activation budget.

The trace ``memory`` already makes is shared: while it runs, the joint graph torch's partitioner is handed for each
region is recorded; each budget then reruns only the partition (torch's own, with
``torch._functorch.config.activation_memory_budget`` patched). The eager step and the optimizer's step
(``get_optimizer(model)``) are run once more, counting live bytes.
"""

from __future__ import annotations

import contextlib
from typing import Optional

from graphtool.commands.progress import SILENT, Progress
from graphtool.errors import UsageError


def check_fit(fit: Optional[str], budgets: Optional[str], *, launch=None, dynamic: bool = False) -> None:
    """Refuse (exit 2) what ``--fit``/``--budgets`` cannot take, before anything runs."""
    from graphtool.analysis.memory.fit import parse_budgets, parse_target

    if fit is None and budgets is None:
        return
    if fit is not None:
        parse_target(fit)
    if budgets is not None:
        parse_budgets(budgets)
    for flag, given in ((getattr(launch, "flag", ""), getattr(launch, "wrapped", False)), ("--dynamic", dynamic)):
        if given:
            raise UsageError(f"--fit/--budgets with {flag}: not supported yet", hint=f"drop {flag}")


@contextlib.contextmanager
def recording(fit: Optional[str], budgets: Optional[str]):
    """The joint graphs the trace partitions, recorded when ``--budgets`` asks for them."""
    records: list = []
    if budgets is None:
        yield records
        return
    from graphtool.capture import compat

    with compat.recording_joint_partitions(records):
        yield records


def fit_report(spec, report, capture, joints: list, fit: Optional[str], budgets: Optional[str],
               progress: Progress = SILENT):
    from graphtool.analysis.memory.fit import parse_budgets, parse_target
    from graphtool.analysis.memory.fit_report import build_fit_report, held_bytes
    from graphtool.capture.memory.live_bytes import eager_step_peak, optimizer_step, own_step_peaks

    target = parse_target(fit) if fit is not None else None
    swept = parse_budgets(budgets) if budgets is not None else ()
    if swept and (not capture.training or not any(r.backward is not None for r in capture.regions)):
        raise UsageError("--budgets: the model has no backward graph (inference: nothing requires grad), so there "
                         "is no activation budget to sweep",
                         hint="--budgets needs a training step: a parameter or input that requires grad")
    if swept and len(joints) != sum(1 for r in capture.regions if r.backward is not None):
        raise UsageError(f"--budgets with --backend {capture.backend}: its partitioner is not torch's min-cut "
                         "partitioner, which the activation budget steers",
                         hint="use --backend inductor or aot_eager")
    progress.phase("running the eager step and the optimizer's step, counting live bytes...")
    from graphtool.commands.progress import quiet_stdout

    own = capture.own_step  # a step that runs its own backward and optimizer: run as written
    with quiet_stdout():  # the model's and the optimizer's prints: stdout carries only graphtool's document
        own_peaks = own_step_peaks(spec, own.kind) if own is not None else None
        eager_peak = eager_step_peak(spec) if capture.training and own is None else None
        optimizer = optimizer_step(spec) if capture.training and own is None else None
    if own_peaks is not None and own_peaks.own is not None:
        optimizer = (own_peaks.state, own_peaks.state + own_peaks.own)
    held = held_bytes(spec, report, optimizer, target)
    if swept:
        progress.phase(f"partitioning at {len(swept)} activation budgets...")
    return build_fit_report(report, capture, joints, held=held, eager_peak=eager_peak, budgets=swept, target=target,
                            own_step=own_peaks)
