"""Run a model in several modes on the same inputs, check each against eager, then time it.

Modes: ``eager``; ``compile[MODE]`` (``torch.compile`` with a mode or backend); with CUDA graphs,
``cudagraph replay`` (graphtool's own capture of the eager step: static input buffers, warm-up on a side
stream, capture, then copy fresh inputs in and replay) and ``compile[reduce-overhead]``
(``torch.compile(mode="reduce-overhead")``) as torch's reference.

Every mode's outputs (and gradients with ``backward``) are compared with eager's before it is timed;
a mismatch is reported and that mode is not timed. A failure in one mode (a capture error) is
caught and explained; the others still run.
"""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from graphtool.capture.graph_breaks import quiet_torch_logs
from graphtool.capture.script import ModelSpec, is_module
from graphtool.capture.tensors import iter_tensors, map_tensors
from graphtool.capture.timers import CudaEventTimer, HostTimer, measure
from graphtool.capture.user_code import running_user_code, user_location_now
from graphtool.errors import BadModelSpec
from graphtool.text import first_line

COMPILE_MODES = ("default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")
ROTATE = 4  # distinct input sets cycled through, so no cache sees the same tensor twice in a row


@dataclass
class ModeResult:
    name: str
    status: str  # ok | mismatch | error | skipped
    reason: str | None = None
    samples_ms: tuple[float, ...] | None = None  # per-iteration latency of each timed repeat
    max_abs_diff: float | None = None
    peak_memory_bytes: int | None = None
    pool_bytes: int | None = None
    details: list[str] = field(default_factory=list)


def input_sets(torch, spec: ModelSpec, count: int = ROTATE) -> list[tuple[tuple, dict]]:
    """``count`` input sets like the example's: floats redrawn, integers redrawn in their range."""
    gen = torch.Generator(device="cpu").manual_seed(1234)

    def fresh(t, k):
        if k == 0:
            return t
        new = t.detach().clone()  # same device, dtype and strides (channels_last stays channels_last)
        if t.is_floating_point() or t.is_complex():
            new.copy_(torch.randn(t.shape, generator=gen, dtype=t.dtype))
        elif t.dtype != torch.bool and t.numel():
            lo, hi = int(t.min()), int(t.max()) + 1  # stay in the range the model was given (token ids)
            new.copy_(torch.randint(lo, hi, t.shape, generator=gen, dtype=t.dtype))
        return new.requires_grad_(t.requires_grad)

    return [
        (map_tensors(spec.args, lambda t, k=k: fresh(t, k)), map_tensors(spec.kwargs, lambda t, k=k: fresh(t, k)))
        for k in range(count)
    ]


def snapshot(torch, model, sets) -> Callable[[], None]:
    """Save the inputs (values and shape, strides, offset) and the model's buffers; return ``restore``.

    Every check against eager must start from the same state: a model that mutates an input
    (``total.add_(x)``, ``x.t_()``) or a buffer would otherwise be compared on different data, and
    show a mismatch that is not there. Restoring is in place, so the tensors stay the same objects.
    """
    tensors = list({id(t): t for t in iter_tensors(sets)}.values())
    if is_module(model):
        tensors += list(model.buffers())
    saved = [(t.detach().clone(), t.size(), t.stride(), t.storage_offset()) for t in tensors]

    def restore() -> None:
        with torch.no_grad():
            for t, (value, size, stride, offset) in zip(tensors, saved):
                if (t.size(), t.stride(), t.storage_offset()) != (size, stride, offset):
                    t.as_strided_(size, stride, offset)
                t.copy_(value)

    return restore


def frozen_result(result):
    """A copy of a step's ``(outputs, gradients)`` that later runs cannot change (outputs may alias
    inputs, a CUDA graph's outputs are overwritten by the next replay)."""
    out, grads = result
    return map_tensors(out, lambda t: t.detach().clone()), [g.clone() if g is not None else None for g in grads]


class NothingToDifferentiate(BadModelSpec):
    """``backward`` was asked for, but no output requires grad."""


def _params(model) -> list:
    return [p for p in model.parameters() if p.requires_grad] if is_module(model) else []


def make_step(torch, fn, model, backward: bool):
    """One iteration: forward, and with ``backward`` the gradient of the outputs' sum."""
    params = _params(model)

    def step(args, kwargs):
        if not backward:
            with torch.no_grad():
                return fn(*args, **kwargs), []
        for p in params:
            p.grad = None
        out = fn(*args, **kwargs)
        differentiable = [t.float().sum() for t in iter_tensors(out) if t.requires_grad]
        if not differentiable:
            raise NothingToDifferentiate("no output of the model requires grad, so there is no backward pass to time")
        sum(differentiable).backward()
        return out, [p.grad for p in params]

    return step


def compare(torch, expected, got) -> tuple[bool, float]:
    """Outputs and gradients against eager's: (all close, largest absolute difference)."""
    exp = [t for t in iter_tensors(expected) if t is not None]
    act = [t for t in iter_tensors(got) if t is not None]
    if len(exp) != len(act):
        return False, float("inf")
    worst = 0.0
    ok = True
    for e, a in zip(exp, act):
        if e.shape != a.shape:
            return False, float("inf")
        e, a = e.detach().float().cpu(), a.detach().float().cpu()
        tol = 1e-2 if e.dtype in (torch.float16, torch.bfloat16) else 1e-3
        diff = float((e - a).abs().max()) if e.numel() else 0.0
        worst = max(worst, diff)
        ok = ok and torch.allclose(e, a, rtol=tol, atol=tol)
    return ok, worst


def check_against_eager(torch, reference, got) -> tuple[bool, float, str]:
    """A step's ``(outputs, gradients)`` against eager's: (all close, largest difference, what
    differs first: "output" or "gradients")."""
    ok, diff = compare(torch, reference[0], got[0])
    if not ok:
        return False, diff, "output"
    ok, grad_diff = compare(torch, reference[1], got[1])
    return ok, max(diff, grad_diff), "output" if ok else "gradients"


def cuda_graph_step(torch, step, static_args, static_kwargs, *, warmup: int = 3):
    """Capture ``step`` into a CUDA graph (torch's recipe) and return ``(replay, outputs, pool_bytes)``.

    ``replay(args, kwargs)`` copies fresh inputs into the static buffers, replays the graph and
    returns the static outputs (overwritten by the next replay).
    """
    statics = [t for t in iter_tensors((static_args, static_kwargs))]
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(warmup):
            step(static_args, static_kwargs)
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()
    before = torch.cuda.memory_reserved()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        static_out = step(static_args, static_kwargs)
    torch.cuda.synchronize()
    pool = torch.cuda.memory_reserved() - before

    def replay(args, kwargs):
        for dst, src in zip(statics, iter_tensors((args, kwargs))):
            dst.copy_(src)
        graph.replay()
        return static_out

    return replay, static_out, pool


def cuda_device_of(spec: ModelSpec):
    """The CUDA device the model's inputs or parameters are on, or None (it runs on the CPU)."""
    params = spec.model.parameters() if is_module(spec.model) else ()
    return next((t.device for t in [*iter_tensors((spec.args, spec.kwargs)), *params] if t.is_cuda), None)


def run_modes(
    spec: ModelSpec,
    *,
    compile_mode: str | None = "default",
    cudagraphs: bool = False,
    backward: bool = False,
    warmup: int = 10,
    iters: int = 100,
    repeat: int = 3,
    timer_factory: Callable[[], Any] | None = None,
    capture_blocked: str | None = None,
    on_progress: Callable[[str, int], None] | None = None,
    on_phase: Callable[[str], None] | None = None,
    cuda: bool | None = None,
    quiet: bool = True,
) -> list[ModeResult]:
    """Check then time each mode. ``capture_blocked`` (the verdict's reasons) skips graphtool's capture.

    ``cuda``: whether the model runs on a CUDA device (CUDA events, capture, memory figures);
    ``None`` looks at where its inputs and parameters are. ``on_phase`` hears each untimed step
    ("compiling compile[default]"), ``on_progress`` each timed repeat. ``quiet`` keeps torch's own
    log lines and warnings out of the output (graphtool reports what matters; ``--debug`` shows them).
    """
    with quiet_torch(quiet):
        return _run_modes(spec, compile_mode=compile_mode, cudagraphs=cudagraphs, backward=backward, warmup=warmup,
                          iters=iters, repeat=repeat, timer_factory=timer_factory, capture_blocked=capture_blocked,
                          on_progress=on_progress, on_phase=on_phase or (lambda text: None), cuda=cuda)


@contextlib.contextmanager
def quiet_torch(enabled: bool = True):
    """torch's log handlers silenced and its Python warnings ignored (``enabled``), the user's own kept."""
    if not enabled:
        yield
        return
    with quiet_torch_logs(True), warnings.catch_warnings():
        warnings.filterwarnings("ignore", module=r"torch(\.|$)")
        yield


def _run_modes(spec, *, compile_mode, cudagraphs, backward, warmup, iters, repeat, timer_factory, capture_blocked,
               on_progress, on_phase, cuda) -> list[ModeResult]:
    import torch

    if cuda is None:
        cuda = cuda_device_of(spec) is not None
    if timer_factory is None:
        timer_factory = (lambda: CudaEventTimer(torch)) if cuda else (lambda: HostTimer())
    sets = input_sets(torch, spec)
    restore = snapshot(torch, spec.model, sets)
    eager_step = make_step(torch, spec.model, spec.model, backward)
    reference, random_ops = _eager_reference(torch, spec, eager_step, sets)
    clock = _Clock(torch, sets, timer_factory, cuda, warmup, iters, repeat, on_progress)
    samples, mem = clock.timed("eager", eager_step)
    results = [ModeResult("eager", "ok", samples_ms=samples, max_abs_diff=0.0, peak_memory_bytes=mem)]
    for name, build in _other_modes(torch, spec, compile_mode, cudagraphs):
        if build is None:
            on_phase(f"capturing a CUDA graph ({name})...")
            results.append(_graphtool_capture(torch, eager_step, sets, reference, random_ops, clock.timed, cuda,
                                              capture_blocked, restore))
        else:
            on_phase(f"compiling {name} (torch.compile runs on the first call)...")
            result = _compiled_mode(torch, name, build, spec, backward, sets, reference, random_ops, clock, restore)
            results.append(_without_cuda_graphs(result, cuda))
    return results


#: torch.compile modes whose point is CUDA graphs: on the CPU they run without them
CUDA_GRAPH_MODES = ("reduce-overhead", "max-autotune")


def _without_cuda_graphs(result: ModeResult, cuda: bool) -> ModeResult:
    """Say so when a mode the user asked for ran without the CUDA graphs it stands for (on the CPU
    torch.compile skips them quietly, and the timing would pass for reduce-overhead's)."""
    mode = result.name.removeprefix("compile[").removesuffix("]")
    if cuda or mode not in CUDA_GRAPH_MODES or result.reason:
        return result
    result.reason = (f"ran without CUDA graphs: on the CPU torch.compile(mode={mode!r}) applies none, so this is "
                     "inductor's code alone; run on a CUDA device to time graph replay")
    return result


@dataclass
class _Clock:
    """Times one mode's step over the rotating input sets (and reads peak memory on CUDA)."""

    torch: Any
    sets: list
    timer_factory: Callable[[], Any]
    cuda: bool
    warmup: int
    iters: int
    repeat: int
    on_progress: Callable[[str, int], None] | None

    def timed(self, name: str, step_for_set) -> tuple[tuple[float, ...], int | None]:
        if self.cuda:
            self.torch.cuda.synchronize()
            self.torch.cuda.reset_peak_memory_stats()
        progress = (lambda n: self.on_progress(name, n)) if self.on_progress else None
        samples = measure(lambda i: step_for_set(*self.sets[i % len(self.sets)]), self.timer_factory(),
                          warmup=self.warmup, iters=self.iters, repeat=self.repeat, on_progress=progress)
        return samples, self.torch.cuda.max_memory_allocated() if self.cuda else None


def _eager_reference(torch, spec: ModelSpec, eager_step, sets):
    """Eager's result on the first input set (and which random ops it drew); every set must run."""
    torch.manual_seed(0)
    try:
        with running_user_code("the model raised in eager mode on the example inputs or a fresh draw of them",
                               where=spec.location):
            reference, random_ops = _with_random_ops(torch, lambda: eager_step(*sets[0]))
            reference = frozen_result(reference)
            for other in sets[1:]:  # the rotated inputs must work too before anything is timed
                eager_step(*other)
    except NothingToDifferentiate as exc:  # graphtool's own check, passed through the boundary
        raise BadModelSpec(f"{spec.location}: --backward: {exc.message}",
                           hint="drop --backward, or give the model trainable parameters or inputs that require grad") from None
    return reference, random_ops


def _other_modes(torch, spec: ModelSpec, compile_mode: str | None, cudagraphs: bool) -> list[tuple[str, Callable | None]]:
    """The modes after eager, each with how to build its callable (None: graphtool's own capture)."""
    modes: list[tuple[str, Callable | None]] = []
    if compile_mode and compile_mode != "none":
        modes.append((f"compile[{compile_mode}]", lambda: _compiled(torch, spec.model, compile_mode)))
    if cudagraphs:
        modes.append(("cudagraph replay", None))
        if compile_mode != "reduce-overhead":
            modes.append(("compile[reduce-overhead]", lambda: _compiled(torch, spec.model, "reduce-overhead")))
    return modes


def _compiled_mode(torch, name: str, build, spec: ModelSpec, backward: bool, sets, reference, random_ops, clock: _Clock,
                   restore) -> ModeResult:
    """Build a compiled mode, check it against eager from the same state, then time it."""
    from graphtool.capture import compat

    try:
        compat.dynamo_reset()
        step = make_step(torch, build(), spec.model, backward)
        restore()
        torch.manual_seed(0)
        got = step(*sets[0])
        same, diff, which = check_against_eager(torch, reference, got)
        del got  # reduce-overhead's outputs live in its graph pool: hold none across runs
        if not same:
            return ModeResult(name, "mismatch", _mismatch(which, diff, random_ops), max_abs_diff=diff)
        samples, mem = clock.timed(name, step)
        return ModeResult(name, "ok", samples_ms=samples, max_abs_diff=diff, peak_memory_bytes=mem)
    except Exception as exc:
        return ModeResult(name, "error", f"{type(exc).__name__}: {first_line(exc) or ''}")


def _with_random_ops(torch, run):
    """``run()``, and the random ops it made (``{"bernoulli_": "model.py:12"}``, user line if any).

    A model that draws random numbers (dropout in training mode) cannot match eager under
    compilation or graph replay, which draw them differently; the mismatch message says so.
    """
    from graphtool.capture import compat

    seen: dict[str, str | None] = {}
    seeded = torch.Tag.nondeterministic_seeded

    class RandomOps(compat.dispatch_mode_base()):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            if seeded in func.tags:
                seen.setdefault(func.overloadpacket.__name__, user_location_now(skip=1))
            return func(*args, **(kwargs or {}))

    with RandomOps():
        out = run()
    return out, seen


def _mismatch(what: str, diff: float, random_ops: dict) -> str:
    text = f"{what} differs from eager by up to {diff:.3g}; not timed"
    if random_ops:
        ops = ", ".join(f"{op} at {where}" if where else op for op, where in random_ops.items())
        text += (f". The model draws random numbers ({ops}), which compiled code and graph replay draw "
                 "differently from eager: call model.eval() or set dropout to 0 in the script to compare")
    return text


def _graphtool_capture(torch, eager_step, sets, reference, random_ops, timed, cuda, blocked, restore) -> ModeResult:
    name = "cudagraph replay"
    if not cuda:
        return ModeResult(name, "skipped", "no CUDA device is present: CUDA-graph capture needs one")
    if blocked:
        return ModeResult(name, "skipped", f"not capturable: {blocked}")
    try:
        restore()
        static_args, static_kwargs = _clone_inputs(torch, sets[0])
        replay, _, pool = cuda_graph_step(torch, eager_step, static_args, static_kwargs)
        restore()  # warm-up and capture ran the model: its buffers start again from the check's state
        got = replay(*sets[0])
        same, diff, which = check_against_eager(torch, reference, got)
        if not same:
            return ModeResult(name, "mismatch", _mismatch(f"replay's {which}", diff, random_ops), max_abs_diff=diff)
        stats, mem = timed(name, replay)
        return ModeResult(name, "ok", samples_ms=stats, max_abs_diff=diff, peak_memory_bytes=mem, pool_bytes=pool)
    except Exception as exc:
        return ModeResult(name, "error", f"capture failed: {type(exc).__name__}: {first_line(exc) or ''}")


def _clone_inputs(torch, pair):
    args, kwargs = pair

    def clone(t):
        return t.detach().clone().requires_grad_(t.requires_grad)

    return map_tensors(args, clone), map_tensors(kwargs, clone)

def _compiled(torch, model, mode: str):
    if mode in COMPILE_MODES:
        return torch.compile(model) if mode == "default" else torch.compile(model, mode=mode)
    return torch.compile(model, backend=mode)
