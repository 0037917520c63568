"""The model's step run several times, as a training or serving loop runs it: the steady state.

torch.compile's first call is not what a loop settles into. A guard can fail on the second call (an
input ``t_()``-ed by the first, a buffer the first call changed, grad mode) and dynamo compiles again;
a dynamic size makes cudagraph trees record one CUDA graph per size; a region called k times in a step
is recorded k times. :func:`run_steps` repeats the step on the same model and inputs, as a loop would
(every ``.grad`` reset to None, the forward, the backward in training; buffers and inputs as the step
left them), while the tracing backend logs each compiled graph's calls (:class:`GraphCall`) and
torch's structured trace gives each recompile's guard failure in torch's words (:class:`Recompile`).

Example::

    >>> from graphtool.capture.user.script import load_model
    >>> from graphtool.capture.tracer import trace_model
    >>> log = trace_model(load_model("examples/transpose_input.py"), steps=3).steps
    >>> [r.step for r in log.recompiles], log.region_steps  # step 2: the function and its resume frame
    ([2, 2], (1, 2))
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from graphtool.capture.tensors import iter_tensors

#: ``--steps``' default: enough for a guard that fails on the second call and a CUDA graph recorded
#: on the call after its warm-up
DEFAULT_STEPS = 3


@dataclass(frozen=True)
class GraphCall:
    """One call of a compiled graph: in which step, which region's forward/backward/inference graph,
    and the integer inputs it got (a dynamic size's value: cudagraph trees keep one graph per set)."""

    step: int
    region: int
    graph: str
    ints: tuple = ()


@dataclass(frozen=True)
class Recompile:
    """A frame dynamo compiled again because a guard failed: ``reason`` is torch's own text."""

    step: int
    compile_id: str
    function: str | None
    file: str | None
    line: int | None
    reason: str

    def to_dict(self) -> dict:
        return {"step": self.step, "compile_id": self.compile_id, "function": self.function, "file": self.file,
                "line": self.line, "reason": self.reason}


@dataclass(frozen=True)
class ValueGuard:
    """A Python number dynamo compiled into a graph as a constant, guarded on its value (``scale == 0.2753``):
    the steady state holds while it keeps that value; a step with another value fails the guard and dynamo
    compiles again. ``name`` is the local as the compiled frame names it (``pos``); ``___stack0`` is the value
    a graph break handed to the frame resuming after it (what ``.item()`` returned), and ``read_at`` the line
    that broke. ``file``/``line``: where the value is used (the guard's innermost frame outside torch)."""

    name: str
    value: int | float
    file: str | None
    line: int | None
    function: str | None = None
    read_at: int | None = None
    region: int = 0

    @property
    def handed_over(self) -> bool:
        """The value came across a graph break (computed eagerly before it), not as an argument."""
        return self.name.startswith("___stack")

    def to_dict(self) -> dict:
        return {"name": None if self.handed_over else self.name, "value": self.value, "type": type(self.value).__name__,
                "file": self.file, "line": self.line, "function": self.function, "read_at": self.read_at,
                "region": self.region}


_RESUME_AT = re.compile(r"^torch_dynamo_resume_in_\w+?_at_(\d+)$")


def value_guards_now(region: int) -> tuple[ValueGuard, ...]:
    """The value guards of the frame dynamo is compiling now (a backend's call), as :class:`ValueGuard` records of
    ``region``.

    >>> value_guards_now(0)  # outside a trace: none
    ()
    """
    from graphtool.capture import compat
    from graphtool.capture.graph_breaks import is_user_file

    out = []
    for name, value, frames, function in compat.value_guards():
        used = next((f for f in reversed(frames) if is_user_file(f[0])), frames[-1] if frames else None)
        m = _RESUME_AT.match(function or "") if name.startswith("___stack") else None
        out.append(ValueGuard(name, value, used[0] if used else None, used[1] if used else None, function,
                              int(m.group(1)) if m else None, region))
    return tuple(out)


@dataclass
class StepLog:
    """What a run of ``steps`` steps did: every graph call, every recompile, when each region compiled."""

    steps: int  # the steps that ran to the end
    calls: list[GraphCall] = field(default_factory=list)
    recompiles: list[Recompile] = field(default_factory=list)
    region_steps: tuple[int, ...] = ()
    failed: str | None = None  # a later step raised (the loop would fail there too): which, and torch's error
    # (step, fail_type, fail_reason) of each frame dynamo gave up on in a step (the recompile limit among them)
    frame_failures: list = field(default_factory=list)
    settled_steps: tuple[int, ...] = ()  # steps not run again: a settled input signature's calls, repeated


class CallLogger:
    """Kept by the tracing backend: the step now running, and each compiled graph's calls."""

    def __init__(self):
        self.step = 1
        self.calls: list[GraphCall] = []

    def wrap(self, region_index: int, graph: str, fn):
        """``fn`` (a boxed graph runner: one list argument) logging each call first."""

        def logged(args):
            ints = tuple(a for a in args if isinstance(a, int) and not isinstance(a, bool))
            self.calls.append(GraphCall(self.step, region_index, graph, ints))
            return fn(args)

        logged._boxed_call = True  # AOT autograd calls it with the list, as it calls ``fn``
        return logged


def check_steps(steps: Any) -> int:
    """``--steps``: a whole number >= 1, else a usage error (exit 2)."""
    from graphtool.errors import UsageError

    if isinstance(steps, bool) or not isinstance(steps, int) or steps < 1:
        raise UsageError(f"--steps {steps!r}: the number of steps must be a whole number >= 1",
                         hint="--steps 3 runs the model's step three times, as a loop would")
    return steps


def reset_grads(spec) -> None:
    """What a loop does before each step: every parameter's and leaf input's ``.grad`` set to None."""
    params = list(spec.model.parameters()) if hasattr(spec.model, "parameters") else []
    for t in params + [t for t in iter_tensors((spec.args, spec.kwargs)) if t.is_leaf]:
        t.grad = None


def run_steps(spec, compiled, calls: CallLogger, first_output, *, steps: int, training: bool, backward, frames: list,
              regions: list, variant=None, reset: bool = True, inputs=None, signature=None, on_step=None) -> StepLog:
    """Steps 2..``steps`` after the first (already run): each resets grads, calls ``compiled`` on the same
    inputs (as the previous step left them), and runs ``backward`` in training. ``frames`` is the list of
    torch's compilation_metrics events the trace listener fills; ``regions`` the backend's regions.
    ``variant`` (``--dynamic``: the second input size, as step 1 ran it) runs after the step's own call,
    every step, as a loop serving both sizes would. ``reset`` False: a step that runs its own backward and
    optimizer (``train_step``) manages its gradients itself; the loop only calls it.

    ``inputs`` (a shape schedule, :mod:`graphtool.capture.schedule`): step k's ``(args, kwargs)`` is
    ``inputs[k - 2]`` instead of the same inputs every step, and ``steps`` is ``len(inputs) + 1``.
    ``signature(args, kwargs)``: a key for what dynamo's guards read of the inputs (sizes, dtypes,
    marks); a step whose key an earlier step ran with, while nothing compiled since, is settled: its
    graph calls are that step's again, and it is not run. ``on_step(step, steps)`` is told as each step starts."""
    marks = [len(frames)]
    done, failed = 1, None
    seen: dict = {}  # signature -> (the step that ran with it, regions and frames then)
    settled: list[int] = []
    if inputs is not None:
        steps = len(inputs) + 1
        if signature is not None:
            seen[signature(spec.args, spec.kwargs)] = (1, len(regions), marks[0])
    for step in range(2, steps + 1):
        calls.step = step
        if on_step is not None:
            on_step(step, steps)
        args, kwargs = (spec.args, spec.kwargs) if inputs is None else inputs[step - 2]
        key = signature(args, kwargs) if inputs is not None and signature is not None else None
        before = seen.get(key) if key is not None else None
        if before is not None and before[1:] == (len(regions), len(frames)):
            calls.calls += [GraphCall(step, c.region, c.graph, c.ints) for c in calls.calls if c.step == before[0]]
            settled.append(step)
            marks.append(len(frames))
            done = step
            continue
        if reset:
            reset_grads(spec)
        try:
            out = compiled(*args, **kwargs)
            if training:
                backward(out)
            if variant is not None:
                more = variant()
                if training:
                    backward(more)
        except Exception as exc:  # the first step ran: keep what the steps before this one showed
            failed = _failure(step, exc)
            break
        marks.append(len(frames))
        done = step
        if key is not None:
            seen[key] = (step, len(regions), len(frames))
    calls.step = 1
    return StepLog(steps=done, calls=[c for c in calls.calls if c.step <= done], recompiles=_recompiles(frames, marks, _entry(spec)),
                   region_steps=tuple(getattr(r, "step", 1) for r in regions if getattr(r, "step", 1) <= done), failed=failed,
                   frame_failures=_frame_failures(frames, marks), settled_steps=tuple(settled))


def _frame_failures(frames: list, marks: list[int]) -> list:
    """(step, fail_type, fail_reason) of every compilation_metrics event with a failure, by step."""
    return [(_step_of(i, marks), str(f.fail_type), str(getattr(f, "fail_reason", "") or ""))
            for i, f in enumerate(frames) if getattr(f, "fail_type", None)]


def _step_of(i: int, marks: list[int]) -> int:
    """The step compilation_metrics event ``i`` happened in: ``marks`` holds how many events there were as each
    step after the first began (and as the last one ended)."""
    return 1 + sum(1 for m in marks if i >= m)


def _failure(step: int, exc: BaseException) -> str:
    from graphtool.capture.user.boundary import user_frames
    from graphtool.display_paths import display_path
    from graphtool.text import first_line

    frames = user_frames(exc)
    where = f" at {display_path(frames[-1].filename)}:{frames[-1].lineno}" if frames else ""
    shown = getattr(exc, "shown_as", None) or type(exc).__name__  # an error raised in torch's place reads as torch's
    text = f"step {step} raised{where}: {shown}: {first_line(exc) or ''}"
    if "on meta tensors" in text:  # code run eagerly (a stance, a graph break) read a value the stand-in lacks
        text += (" (the meta stand-in has shapes but no values: on a GPU this eager code reads real ones; the "
                 "steps after it are not predicted)")
    return text


def _entry(spec) -> tuple:
    """(name, file, first line) of the code the user compiled: a module's ``forward``, else the function."""
    import inspect

    fn = type(spec.model).forward if hasattr(spec.model, "forward") and hasattr(type(spec.model), "forward") else spec.model
    code = getattr(inspect.unwrap(fn), "__code__", None)
    if code is None or _in_torch(code.co_filename):  # torch's own module (nn.Sequential): the script that built it
        return (type(spec.model).__name__, str(spec.path), getattr(spec, "line", None))
    return (code.co_name, code.co_filename, code.co_firstlineno)


def _in_torch(filename: str | None) -> bool:
    """A frame of torch's own that stands for the model the user compiled: dynamo's wrapper
    (``external_utils``) or an ``nn`` module's forward. torch's other code (an optimizer's ``step``,
    compiled from the user's ``opt.step()``) is named as it is."""
    import os

    import torch

    root = os.path.dirname(torch.__file__) + os.sep
    return bool(filename) and filename.startswith(root) and not filename.startswith(root + "optim" + os.sep)


def _recompiles(frames: list, marks: list[int], entry: tuple = (None, None, None)) -> list[Recompile]:
    """Each compilation_metrics event with a recompile reason, with the step it happened in. A frame of
    torch's own wrapper (``torch.compile(module)`` enters through ``external_utils``) is named by the
    user's code it wraps (``entry``); the line is where the failed guard's value is used, when torch names it."""
    from graphtool.capture.graph_breaks import guard_site

    found = []
    for i, f in enumerate(frames):
        reason = getattr(f, "recompile_reason", None)
        if not reason:
            continue
        step = _step_of(i, marks)
        if step <= len(marks):
            name, file, line = (f.co_name, f.co_filename, f.co_firstlineno) if not _in_torch(f.co_filename) else entry
            file, line = guard_site(reason) or (file, line)  # the line that uses the guarded value
            found.append(Recompile(step, str(f.compile_id), name, file, line, str(reason).strip()))
    return found
