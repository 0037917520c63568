"""Run a model in several modes on the same inputs, check each against eager, then time it.

Modes: ``eager``; ``compile[MODE]`` (``torch.compile`` with a mode or backend); with CUDA graphs,
``cudagraph replay`` (graphtool's own capture of the eager step: static input buffers, warm-up on a side
stream, capture, then copy fresh inputs in and replay) and ``compile[reduce-overhead]``
(``torch.compile(mode="reduce-overhead")``) as torch's reference.

Every mode's outputs (and gradients with ``backward``) are compared with eager's before it is timed;
a mismatch is reported and that mode is not timed. A failure in one mode (a capture error) is
caught and explained, leaves no CUDA state behind (stream, capture, allocator pool, compiled
caches), and the others still run.

A model that draws random numbers (dropout in training) cannot match eager under compilation or
replay, which draw them differently. Each mode is then checked with dropout turned off (every dropout
module's ``p`` and the dropout functions' ``p`` set to 0, see :func:`dropout_off`) and timed as written,
dropout on. Random ops that are not dropout (``torch.randn`` in ``forward``) cannot be turned off: a
mode that then differs is timed anyway and marked ``unchecked``, never left without a number.
"""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from graphtool.capture.bench.timers import CudaEventTimer, HostTimer, measure
from graphtool.capture.graph_breaks import quiet_torch_logs
from graphtool.capture.tensors import iter_tensors, map_tensors
from graphtool.capture.user.boundary import running_user_code, user_location_now
from graphtool.capture.user.script import ModelSpec, is_module
from graphtool.errors import BadModelSpec
from graphtool.text import first_line

COMPILE_MODES = ("default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")
ROTATE = 4  # distinct input sets cycled through, so no cache sees the same tensor twice in a row


@dataclass
class ModeResult:
    name: str
    status: str  # ok | mismatch | error | skipped | unchecked (timed, but random ops made the check impossible)
    reason: str | None = None
    samples_ms: tuple[float, ...] | None = None  # per-iteration latency of each timed repeat
    max_abs_diff: float | None = None
    peak_memory_bytes: int | None = None
    pool_bytes: int | None = None
    details: list[str] = field(default_factory=list)
    check: str | None = None  # what the check compared: "as written" | "dropout off"; None when not compared
    random_ops: dict | None = None  # eager's only: see RandomOpsCheck.to_dict
    own_step: dict | None = None  # eager's only: the call is a training step (OwnStep.to_dict), timed as it is
    backward: bool | None = None  # eager's only: whether the backward was timed, as decided (``backward=None``: by the model)
    timed_why: str | None = None  # eager's only: why that is what was timed


@dataclass(frozen=True)
class RandomOpsCheck:
    """The random ops eager drew, and how the modes were checked despite them."""

    drawn: dict  # op -> the user's file:line (None when no user frame), as the model is written
    turned_off: tuple  # what dropout_off changed ("nn.Dropout p=0.1 (3 modules)", "F.dropout p -> 0"...)
    still_drawn: dict  # random ops left with dropout off: a mode that differs is timed unchecked

    check = "dropout off"  # every mode was compared with eager with dropout turned off

    def to_dict(self) -> dict:
        return {"drawn": dict(self.drawn), "check": self.check, "turned_off": list(self.turned_off),
                "still_drawn": dict(self.still_drawn)}


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


def step_state(torch, model) -> Callable[[], None]:
    """Save what a training step writes besides its inputs: every parameter it reaches (values and ``.grad``) and
    the state of every optimizer it reaches; return ``restore``, which puts them back in place (an optimizer's
    lazily made state, absent before the first step, is absent again)."""
    from graphtool.capture.train_step import optimizer_states, put_back_optimizer
    from graphtool.capture.user.input_names import named_state

    optimizers = optimizer_states(model)
    params = {id(p): p for _name, p in named_state(model)[0]}
    params.update((id(p), p) for _opt, _state, kept in optimizers for p, _copy in kept)
    saved = [(p, p.detach().clone(), None if p.grad is None else p.grad.detach().clone()) for p in params.values()]

    def restore() -> None:
        with torch.no_grad():
            for p, value, grad in saved:
                p.copy_(value)
                p.grad = None if grad is None else grad.clone()
        for opt, state, _kept in optimizers:
            put_back_optimizer(opt, state)

    return restore


def runs_own_backward(torch, spec: ModelSpec, sets, restore) -> Any:
    """Whether the model's call (a function, or a module said to be a step) is a training step that runs its own
    backward (an :class:`~graphtool.capture.train_step.OwnStep`, else None): one eager call with gradients on,
    watched as the trace watches it, then everything it wrote put back."""
    from graphtool.capture.train_step import StepWatch, declared, optimizer_of_step
    from graphtool.capture.user.input_names import named_state

    said = StepWatch(spec, _NoCalls(), [p for _name, p in named_state(spec.model)[0]])
    if declared(spec) is not None or optimizer_of_step(spec.model) is not None:
        return said.verdict()
    try:
        with torch.enable_grad():
            out = spec.model(*sets[0][0], **sets[0][1])
        return said.verdict(out)
    except Exception:  # the eager check that follows says what failed, at the user's line
        return None
    finally:
        restore()


class _NoCalls:
    calls: list = []


def frozen_result(result):
    """A copy of a step's ``(outputs, gradients)`` that later runs cannot change (outputs may alias
    inputs, a CUDA graph's outputs are overwritten by the next replay)."""
    out, grads = result
    return map_tensors(out, lambda t: t.detach().clone()), [g.clone() if g is not None else None for g in grads]


class NothingToDifferentiate(BadModelSpec):
    """``backward`` was asked for, but no output requires grad."""


def _params(model) -> list:
    return [p for p in model.parameters() if p.requires_grad] if is_module(model) else []


def make_step(torch, fn, model, backward: bool, own_step: bool = False):
    """One iteration: forward, and with ``backward`` the gradient of the outputs' sum; ``own_step``: the call is a
    whole training step (its own backward and optimizer), run as it is, gradients on, nothing added."""
    params = _params(model)

    def step(args, kwargs):
        if own_step:
            return fn(*args, **kwargs), []
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
    returns the static outputs (overwritten by the next replay). A capture that fails (a host sync)
    raises after :func:`capture` has undone everything it started.
    """
    statics = [t for t in iter_tensors((static_args, static_kwargs))]
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(warmup):
            step(static_args, static_kwargs)
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()
    # capture() empties the allocator's cache first: measured before that, the pool's bytes came out
    # negative on an H200 after an earlier mode had left cached blocks (-29360128)
    torch.cuda.empty_cache()
    before = torch.cuda.memory_reserved()
    graph = torch.cuda.CUDAGraph()
    static_out = capture(torch, graph, lambda: step(static_args, static_kwargs))
    torch.cuda.synchronize()
    pool = torch.cuda.memory_reserved() - before

    # the benchmark rotates a few fixed input sets: each is flattened once, not walked on every replay
    # (the walk cost 4 us of a 14 us batch-size-1 step on an H200: replay read 1.31x a hand-written loop)
    pairs: dict = {}

    def replay(args, kwargs):
        hit = pairs.get((id(args), id(kwargs)))
        if hit is None or hit[0] is not args or hit[1] is not kwargs:
            hit = pairs[(id(args), id(kwargs))] = (args, kwargs, list(zip(statics, iter_tensors((args, kwargs)))))
        for dst, src in hit[2]:
            dst.copy_(src)
        graph.replay()
        return static_out

    return replay, static_out, pool


def capture(torch, graph, fn):
    """``fn()`` captured into ``graph`` on a side stream; its result.

    Not ``with torch.cuda.graph(graph)``: when the captured code fails (``.item()`` is "operation not
    permitted when stream is capturing"), that context manager's ``__exit__`` calls ``capture_end()``,
    which raises on the invalidated capture before it restores the stream, and before it tells the
    caching allocator that the capture is over (torch/cuda/graphs.py, aten/src/ATen/cuda/CUDAGraph.cpp).
    The process then runs on the capture stream with a capture "underway" in the allocator, and the
    modes after it (reduce-overhead's own captures, inductor's compile) fail. Here the stream context
    always exits, and a failed capture is ended, its pool released and the graph reset.
    """
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    pool = torch.cuda.graph_pool_handle()
    device = torch.cuda.current_device()
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        graph.capture_begin(pool=pool)
        try:
            out = fn()
        except BaseException:
            _abandon_capture(torch, graph, device, pool)
            raise
        graph.capture_end()
    torch.cuda.current_stream().wait_stream(side)
    return out


def _abandon_capture(torch, graph, device, pool) -> None:
    """Undo a capture that failed part-way, leaving the process as it was before ``capture_begin``.

    ``capture_end()`` ends the stream's capture mode; on a capture CUDA invalidated it raises before
    ending allocation to the pool. Only then are allocation to the pool ended and the pool released
    here (the caching allocator would otherwise list the capture as under way, and its next
    ``empty_cache()`` or synchronising free trips ``TORCH_INTERNAL_ASSERT(captures_underway.empty())``);
    a capture that did end (a Python error mid-capture) has its pool released by ``graph.reset()``,
    and releasing it twice would free it under its owner."""
    from graphtool.capture import compat

    try:
        graph.capture_end()
    except Exception:
        with contextlib.suppress(Exception):
            compat.end_capture_pool(device, pool)
    with contextlib.suppress(Exception):
        graph.reset()
    with contextlib.suppress(Exception):
        _end_generator_capture(torch, device)


def _end_generator_capture(torch, device) -> None:
    """Take the device's default CUDA generator out of capture mode after a failed capture.

    ``capture_begin`` puts the generator's state in capture mode (``capture_prologue``); only a
    ``capture_end`` that gets past ``cudaStreamEndCapture`` takes it out (``capture_epilogue``), and
    ``reset()`` does not (torch 2.11: aten/src/ATen/cuda/CUDAGraph.cpp). Until then every random op
    outside a capture raises "Offset increment outside graph capture encountered unexpectedly": on an
    H200 (2026-11-26, torch 2.11) each mode after a failed capture of a model with dropout failed so.
    A clone of the state is out of capture mode, with the same seed and offset; the generator takes
    it through the public graph-safe state API."""
    gen = torch.cuda.default_generators[device]
    if hasattr(gen, "clone_state") and hasattr(gen, "graphsafe_set_state"):
        gen.graphsafe_set_state(gen.clone_state())


def cuda_device_of(spec: ModelSpec):
    """The CUDA device the model's inputs or parameters are on, or None (it runs on the CPU)."""
    params = spec.model.parameters() if is_module(spec.model) else ()
    return next((t.device for t in [*iter_tensors((spec.args, spec.kwargs)), *params] if t.is_cuda), None)


def run_modes(
    spec: ModelSpec,
    *,
    compile_mode: str | None = "default",
    cudagraphs: bool = False,
    backward: bool | None = False,
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
    ``backward``: time the forward and backward (True), the forward alone (False), or (None) training as every
    command defaults to: forward and backward when a parameter or input requires grad and an output does, a
    whole training step as it is; eager's result says what was timed and why.

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
    own = None
    from graphtool.capture.train_step import declared

    if not is_module(spec.model) or declared(spec) is True:  # a function (or a module said to be) may be a step
        inputs, state = restore, step_state(torch, spec.model)

        def restore():
            inputs()
            state()

        own = runs_own_backward(torch, spec, sets, restore)
        if own is not None and backward:
            raise BadModelSpec(f"{spec.location}: --backward: the model's call is a training step that runs its own "
                               f"backward ({own.evidence})", hint="drop --backward: graphtool times the step as it is")
    chosen = backward is None
    backward, why = _what_to_time(spec, backward, own)
    eager_step = make_step(torch, spec.model, spec.model, backward, own_step=own is not None)
    try:
        check = _eager_reference(torch, spec, eager_step, sets, restore, asked=not chosen)
    except NothingToDifferentiate:  # training by default, but no output requires grad: the forward is what there is
        restore()
        backward, why = False, "the forward alone: no output of the model requires grad, so there is no backward to time"
        eager_step = make_step(torch, spec.model, spec.model, False, own_step=False)
        check = _eager_reference(torch, spec, eager_step, sets, restore)
    clock = _Clock(torch, sets, timer_factory, cuda, warmup, iters, repeat, on_progress)
    samples, mem = clock.timed("eager", eager_step)
    random = check.random.to_dict() if check.random else None
    said = (f"a training step ({own.evidence}): each mode is checked against eager from the same parameters and "
            "optimizer state, then timed as a loop runs it, each call updating the parameters") if own else None
    results = [ModeResult("eager", "ok", said, samples_ms=samples, max_abs_diff=0.0, peak_memory_bytes=mem,
                          check=check.kind, random_ops=random, own_step=own.to_dict() if own else None,
                          backward=backward, timed_why=why)]
    for name, build in _other_modes(torch, spec, compile_mode, cudagraphs):
        if build is None:
            on_phase(f"capturing a CUDA graph ({name})...")
            results.append(_graphtool_capture(torch, eager_step, check, clock.timed, cuda, capture_blocked))
        else:
            on_phase(f"compiling {name} (torch.compile runs on the first call)...")
            result = _compiled_mode(torch, name, build, spec, backward, check, clock, own_step=own is not None)
            results.append(_without_cuda_graphs(result, cuda))
    return results


def _what_to_time(spec: ModelSpec, backward: bool | None, own) -> tuple[bool, str]:
    """Whether to time the backward, and why: as asked, else training as trace, memory and the rest default to."""
    if own is not None:
        return False, "the call is a whole training step (its own backward and optimizer): timed as it is"
    if backward is not None:
        return backward, ("forward and backward, as asked (--backward)" if backward else
                          "the forward alone, as asked (--inference)")
    from graphtool.capture.user.input_names import named_state

    trains = (any(p.requires_grad for _, p in named_state(spec.model)[0])
              or any(t.requires_grad for t in iter_tensors((spec.args, spec.kwargs))))
    if trains:
        return True, ("training, as every command defaults to: a parameter or input requires grad "
                      "(--inference times the forward alone)")
    return False, "the forward alone: no parameter or input requires grad, so there is no backward to time"


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


@dataclass
class _Check:
    """What every mode is compared with (eager's result on the first input set) and how: as written,
    or with dropout off when the model draws random numbers (:func:`dropout_off`)."""

    torch: Any
    model: Any
    sets: list
    restore: Callable[[], None]
    reference: Any
    random: RandomOpsCheck | None

    @property
    def kind(self) -> str:
        return self.random.check if self.random else "as written"

    def conditions(self):
        return dropout_off(self.torch, self.model) if self.random else contextlib.nullcontext()

    def run(self, step) -> tuple[bool, float, str]:
        """``step`` on the first input set from the check's state, against eager: (same, diff, what)."""
        with self.conditions():
            self.restore()
            self.torch.manual_seed(0)
            return check_against_eager(self.torch, self.reference, step(*self.sets[0]))

    def judge(self, what: str, diff: float) -> tuple[str, str]:
        """A mode that differs: ("mismatch", why: not timed), or ("unchecked", why: timed anyway) when
        random ops graphtool cannot turn off made the comparison meaningless."""
        if self.random and self.random.still_drawn:
            ops = _ops_text(self.random.still_drawn)
            return "unchecked", (f"timed, but not checked: {what} differs from eager by up to {diff:.3g} and the "
                                 f"model draws random numbers graphtool cannot turn off ({ops}), which compiled code "
                                 "and graph replay draw differently from eager (seeding does not help); to check this "
                                 "mode, pass such noise in as an input")
        text = f"{what} differs from eager by up to {diff:.3g}; not timed"
        if self.random:
            text += (f" (compared with dropout off, so the model's random ops ({_ops_text(self.random.drawn)}) "
                     "are not the cause)")
        return "mismatch", text


def _ops_text(ops: dict) -> str:
    return ", ".join(f"{op} at {where}" if where else op for op, where in ops.items())


def _eager_reference(torch, spec: ModelSpec, eager_step, sets, restore, asked: bool = True) -> _Check:
    """Eager's result on the first input set, and which random ops it drew; every set must run.

    When the model draws random numbers, the reference is taken again with dropout off: that is
    what every mode is compared with (and the random ops left then, if any)."""
    torch.manual_seed(0)
    try:
        with running_user_code("the model raised in eager mode on the example inputs or a fresh draw of them",
                               where=spec.location):
            reference, drawn = _with_random_ops(torch, lambda: eager_step(*sets[0]), restore)
            reference = frozen_result(reference)
            for other in sets[1:]:  # the rotated inputs must work too before anything is timed
                eager_step(*other)
            random = None
            if drawn:
                restore()
                with dropout_off(torch, spec.model) as turned_off:
                    torch.manual_seed(0)
                    reference, still = _with_random_ops(torch, lambda: eager_step(*sets[0]), restore)
                    reference = frozen_result(reference)
                random = RandomOpsCheck(drawn, tuple(turned_off), still)
    except NothingToDifferentiate as exc:  # graphtool's own check, passed through the boundary
        if not asked:
            raise  # the backward was the default, not asked for: the caller times the forward instead
        raise BadModelSpec(f"{spec.location}: --backward: {exc.message}",
                           hint="drop --backward, or give the model trainable parameters or inputs that require grad") from None
    return _Check(torch, spec.model, sets, restore, reference, random)


_DROPOUT_MODULES = ("Dropout", "Dropout1d", "Dropout2d", "Dropout3d", "AlphaDropout", "FeatureAlphaDropout")
_DROPOUT_FUNCTIONS = ("dropout", "dropout1d", "dropout2d", "dropout3d", "alpha_dropout", "feature_alpha_dropout")
_TORCH_DROPOUT_FUNCTIONS = ("dropout", "alpha_dropout", "feature_dropout", "feature_alpha_dropout")


@contextlib.contextmanager
def dropout_off(torch, model):
    """Dropout turned off for a correctness check; yields what was turned off, puts everything back.

    Every dropout module's ``p`` is set to 0, and while the block runs ``torch.nn.functional``'s dropout
    functions, ``torch.dropout`` and friends are called with ``p=0`` and
    ``scaled_dot_product_attention`` with ``dropout_p=0`` (transformers passes its attention dropout
    there). Training mode, batch norm and everything else stay as they are. Compiled code traced
    inside the block has no dropout: compile again after it to time the model as written.

    >>> import torch
    >>> m = torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.Dropout(0.5))
    >>> with dropout_off(torch, m) as changed:
    ...     m[1].p
    0.0
    >>> m[1].p, changed[0]
    (0.5, '1 dropout module (p=0.5) set to p=0')
    """
    nn, F = torch.nn, torch.nn.functional
    kinds = tuple(getattr(nn, n) for n in _DROPOUT_MODULES if hasattr(nn, n))
    modules = [m for m in model.modules() if isinstance(m, kinds) and m.p] if hasattr(model, "modules") else []
    saved_p = [(m, m.p) for m in modules]
    patched = [(F, n, getattr(F, n)) for n in _DROPOUT_FUNCTIONS if hasattr(F, n)]
    patched += [(torch, n, getattr(torch, n)) for n in _TORCH_DROPOUT_FUNCTIONS if hasattr(torch, n)]
    sdpa = getattr(F, "scaled_dot_product_attention", None)
    turned_off = []
    if modules:
        ps = ", ".join(sorted({f"{p:g}" for _, p in saved_p}))
        turned_off.append(f"{len(modules)} dropout module{'s' * (len(modules) > 1)} (p={ps}) set to p=0")
    turned_off.append("dropout functions called with p=0")
    try:
        for m in modules:
            m.p = 0.0
        for owner, name, fn in patched:
            setattr(owner, name, _with_p_zero(fn))
        if sdpa is not None:
            F.scaled_dot_product_attention = _sdpa_without_dropout(sdpa)
            turned_off.append("scaled_dot_product_attention called with dropout_p=0")
        yield turned_off
    finally:
        for m, p in saved_p:
            m.p = p
        for owner, name, fn in patched:
            setattr(owner, name, fn)
        if sdpa is not None:
            F.scaled_dot_product_attention = sdpa


def _with_p_zero(fn):
    def no_dropout(input, *args, **kwargs):
        if args:
            args = (0.0, *args[1:])
        else:
            kwargs["p"] = 0.0
        return fn(input, *args, **kwargs)

    return no_dropout


def _sdpa_without_dropout(sdpa):
    def no_dropout(*args, **kwargs):
        if len(args) > 4:  # query, key, value, attn_mask, dropout_p
            args = (*args[:4], 0.0, *args[5:])
        else:
            kwargs["dropout_p"] = 0.0
        return sdpa(*args, **kwargs)

    return no_dropout


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


def _compiled_mode(torch, name: str, build, spec: ModelSpec, backward: bool, check: _Check,
                   clock: _Clock, own_step: bool = False) -> ModeResult:
    """Build a compiled mode, check it against eager from the same state, then time it.

    With dropout off for the check, the compiled code has no dropout: it is compiled again as the
    model is written before it is timed."""
    try:
        _reset_compiled()
        step = make_step(torch, build(), spec.model, backward, own_step)
        same, diff, which = check.run(step)
        status, reason = "ok", None
        if not same:
            status, reason = check.judge(which, diff)
            if status == "mismatch":
                return ModeResult(name, status, reason, max_abs_diff=diff, check=check.kind)
        if check.random:
            _reset_compiled()
            step = make_step(torch, build(), spec.model, backward, own_step)
        samples, mem = clock.timed(name, step)
        return ModeResult(name, status, reason, samples_ms=samples, max_abs_diff=diff, peak_memory_bytes=mem,
                          check=check.kind if status == "ok" else None)
    except Exception as exc:
        return ModeResult(name, "error", describe_error(exc))


def _reset_compiled() -> None:
    """Forget what an earlier mode compiled: dynamo's caches and cudagraph trees' recorded graphs
    (reduce-overhead after a default compile must record its own, not find another mode's)."""
    from graphtool.capture import compat

    compat.dynamo_reset()
    compat.reset_cudagraph_trees()


def describe_error(exc: BaseException) -> str:
    """``Type: first line``, and where torch wraps the real error, the real one too.

    ``BackendCompilerFailed``'s first line is only "backend='inductor' raised:"; the cause is its
    ``inner_exception`` (and ``__cause__``). The innermost exception of that chain is named after it:

    >>> try:
    ...     try:
    ...         raise ValueError("bad shape")
    ...     except ValueError as e:
    ...         raise RuntimeError("backend='inductor' raised:") from e
    ... except RuntimeError as e:
    ...     describe_error(e)
    "RuntimeError: backend='inductor' raised: ValueError: bad shape"
    """
    text = f"{type(exc).__name__}: {first_line(exc) or ''}".rstrip()
    inner, seen = exc, {id(exc)}
    while True:
        nxt = getattr(inner, "inner_exception", None) or inner.__cause__
        if not isinstance(nxt, BaseException) or id(nxt) in seen:
            break
        seen.add(id(nxt))
        inner = nxt
    if inner is exc:
        return text
    cause = f"{type(inner).__name__}: {first_line(inner) or ''}".rstrip()
    return f"{text} {cause}" if text.endswith(":") else f"{text} (caused by {cause})"


def _with_random_ops(torch, run, restore):
    """``run()``, and the random ops it made (``{"bernoulli_": "model.py:12"}``, user line if any).

    Higher-order ops (``torch.cond``, ``while_loop``, ``map``, ``invoke_subgraph``, flex attention)
    pass through the mode (``supports_higher_order_operators``: without it torch raises on them, as
    if the user's model were wrong); while one runs the mode is popped, so random ops inside its
    branches are not named. torch cannot backpropagate through a higher-order op that ran under any
    dispatch mode (its own FlopCounterMode included: "object of type 'bool' has no len()" in
    backward, torch 2.13): when a run that met one fails, it runs again from ``restore()`` without
    the mode, and the default generators' state says whether random numbers were drawn. Either way
    dynamo is reset after a run that met one: ``torch.cond`` run eagerly compiles itself, and what it
    compiled under a mode fails the next call without it ("torch.* op returned non-Tensor").
    """
    from graphtool.capture import compat

    seen: dict[str, str | None] = {}
    hops: list[str] = []
    seeded = torch.Tag.nondeterministic_seeded
    hop = compat.higher_order_operator_type()

    def dispatch(self, func, types, args=(), kwargs=None):
        if isinstance(func, hop):
            hops.append(func.name())
        elif seeded in func.tags and not _no_dropout(func, args, kwargs):
            seen.setdefault(func.overloadpacket.__name__, user_location_now(skip=1))
        return func(*args, **(kwargs or {}))

    class RandomOps(compat.dispatch_mode_base()):
        # torch.cond runs eagerly through a torch.compile of its own: without this, dynamo would trace
        # this frame (and the op's eager kernel through it) and fail on the mode stack it reads
        __torch_dispatch__ = torch.compiler.disable(dispatch)
        supports_higher_order_operators = True

    seed = torch.initial_seed()
    try:
        with RandomOps():
            out = run()
        if hops:  # torch.cond compiles itself when run eagerly; what it compiled under the mode fails outside it
            compat.dynamo_reset()
        return out, seen
    except Exception as exc:
        if not hops and "HigherOrderOperator" not in str(exc):
            raise
    compat.dynamo_reset()
    restore()
    torch.manual_seed(seed)
    before = _generator_states(torch)
    out = run()
    drawn = {} if _generator_states(torch) == before else {_UNNAMED_RANDOM: None}
    return out, drawn


def _no_dropout(func, args, kwargs) -> bool:
    """An op tagged random whose ``dropout_p`` is 0 draws nothing (the CPU flash-attention kernel is
    tagged nondeterministic_seeded whatever its dropout)."""
    from graphtool.capture import compat

    for i, arg in enumerate(compat.op_arguments(func)):
        if arg.name == "dropout_p":
            value = (kwargs or {}).get("dropout_p", args[i] if i < len(args) else arg.default_value)
            return value == 0
    return False


#: what stands for the random ops of a model graphtool could not watch op by op
_UNNAMED_RANDOM = "random numbers (ops not named: the model uses a higher-order op such as torch.cond)"


def _generator_states(torch) -> list:
    states = [torch.get_rng_state()]
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        states += torch.cuda.get_rng_state_all()
    return [bytes(s.tolist()) for s in states]  # byte tensors; no numpy needed


def _graphtool_capture(torch, eager_step, check: _Check, timed, cuda, blocked) -> ModeResult:
    name = "cudagraph replay"
    if not cuda:
        return ModeResult(name, "skipped", "no CUDA device is present: CUDA-graph capture needs one")
    if blocked:
        return ModeResult(name, "skipped", f"not capturable: {blocked}")
    try:
        replay, pool, (same, diff, which) = _check_replay(torch, eager_step, check)
        status, reason = "ok", None
        if not same:
            status, reason = check.judge(f"replay's {which}", diff)
            if status == "mismatch":
                return ModeResult(name, status, reason, max_abs_diff=diff, check=check.kind)
        if check.random:  # Python is frozen at capture: the checked graph has no dropout; capture it as written
            del replay
            check.restore()
            replay, _, pool = cuda_graph_step(torch, eager_step, *_clone_inputs(torch, check.sets[0]))
            check.restore()  # warm-up and capture ran the model: its buffers start again from the check's state
        stats, mem = timed(name, replay)
        return ModeResult(name, status, reason, samples_ms=stats, max_abs_diff=diff, peak_memory_bytes=mem,
                          pool_bytes=pool, check=check.kind if status == "ok" else None)
    except Exception as exc:
        return ModeResult(name, "error", f"capture failed: {describe_error(exc)}")


def _check_replay(torch, eager_step, check: _Check):
    """Capture under the check's conditions and compare one replay with eager:
    ``(replay, pool_bytes, (same, diff, what))``."""
    with check.conditions():
        check.restore()
        replay, _, pool = cuda_graph_step(torch, eager_step, *_clone_inputs(torch, check.sets[0]))
        check.restore()  # warm-up and capture ran the model: its buffers start again from the check's state
        torch.manual_seed(0)
        verdict = check_against_eager(torch, check.reference, replay(*check.sets[0]))
    return replay, pool, verdict


def _clone_inputs(torch, pair):
    args, kwargs = pair

    def clone(t):
        return t.detach().clone().requires_grad_(t.requires_grad)

    return map_tensors(args, clone), map_tensors(kwargs, clone)

def _compiled(torch, model, mode: str):
    if mode in COMPILE_MODES:
        return torch.compile(model) if mode == "default" else torch.compile(model, mode=mode)
    return torch.compile(model, backend=mode)
