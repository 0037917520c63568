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

import time
from dataclasses import dataclass, field
from typing import Any, Callable

from graphtool.analysis.timing import TimingStats, measure
from graphtool.capture.loader import ModelSpec, iter_tensors, map_tensors

COMPILE_MODES = ("default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")
ROTATE = 4  # distinct input sets cycled through, so no cache sees the same tensor twice in a row


@dataclass
class ModeResult:
    name: str
    status: str  # ok | mismatch | error | skipped
    reason: str | None = None
    stats: TimingStats | None = None
    max_abs_diff: float | None = None
    peak_memory_bytes: int | None = None
    pool_bytes: int | None = None
    details: list[str] = field(default_factory=list)


class HostTimer:
    """Host clock around work finished by ``sync`` (``torch.cuda.synchronize`` or a no-op)."""

    def __init__(self, sync: Callable[[], None] = lambda: None):
        self.sync = sync
        self._t0 = 0.0

    def start(self) -> None:
        self.sync()
        self._t0 = time.perf_counter()

    def stop(self) -> float:
        self.sync()
        return (time.perf_counter() - self._t0) * 1000.0


class CudaEventTimer:
    """CUDA events on the current stream: measures GPU time, not host launch time."""

    def __init__(self, torch):
        self.torch = torch
        self._start = self._end = None

    def start(self) -> None:
        self.torch.cuda.synchronize()
        self._start = self.torch.cuda.Event(enable_timing=True)
        self._end = self.torch.cuda.Event(enable_timing=True)
        self._start.record()

    def stop(self) -> float:
        self._end.record()
        self._end.synchronize()
        return float(self._start.elapsed_time(self._end))


def input_sets(torch, spec: ModelSpec, count: int = ROTATE) -> list[tuple[tuple, dict]]:
    """``count`` input sets like the example's: floats redrawn, integers redrawn in their range."""
    gen = torch.Generator(device="cpu").manual_seed(1234)

    def fresh(t, k):
        if k == 0:
            return t
        if t.is_floating_point():
            new = torch.randn(t.shape, generator=gen, dtype=t.dtype).to(t.device)
        elif t.dtype == torch.bool:
            new = t.clone()
        else:
            lo, hi = int(t.min()), int(t.max()) + 1 if t.numel() else 1
            new = torch.randint(lo, max(hi, lo + 1), t.shape, generator=gen, dtype=t.dtype).to(t.device)
        return new.requires_grad_(t.requires_grad)

    return [
        (map_tensors(spec.args, lambda t: fresh(t, k)), map_tensors(spec.kwargs, lambda t: fresh(t, k)))
        for k in range(count)
    ]


def _params(model) -> list:
    return [p for p in model.parameters() if p.requires_grad] if hasattr(model, "parameters") else []


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
        loss = sum(t.float().sum() for t in iter_tensors(out) if t.requires_grad)
        loss.backward()
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
) -> list[ModeResult]:
    """Check then time each mode. ``capture_blocked`` (the verdict's reasons) skips graphtool's capture."""
    import torch

    cuda = any(t.is_cuda for t in iter_tensors((spec.args, spec.kwargs))) or (
        hasattr(spec.model, "parameters") and any(p.is_cuda for p in spec.model.parameters())
    )
    if timer_factory is None:
        timer_factory = (lambda: CudaEventTimer(torch)) if cuda else (lambda: HostTimer())
    sets = input_sets(torch, spec)
    eager_step = make_step(torch, spec.model, spec.model, backward)
    torch.manual_seed(0)
    reference = eager_step(*sets[0])
    results: list[ModeResult] = []

    def timed(name, step_for_set, peak=True, pool=None):
        if cuda:
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
        stats = measure(lambda i: step_for_set(*sets[i % len(sets)]), timer_factory(), warmup=warmup, iters=iters,
                        repeat=repeat, on_progress=(lambda n: on_progress(name, n)) if on_progress else None)
        mem = torch.cuda.max_memory_allocated() if cuda and peak else None
        return stats, mem

    stats, mem = timed("eager", eager_step)
    results.append(ModeResult("eager", "ok", stats=stats, max_abs_diff=0.0, peak_memory_bytes=mem))

    modes: list[tuple[str, Callable]] = []
    if compile_mode and compile_mode != "none":
        modes.append((f"compile[{compile_mode}]", lambda: _compiled(torch, spec.model, compile_mode)))
    if cudagraphs:
        modes.append(("cudagraph replay", None))
        modes.append(("compile[reduce-overhead]", lambda: _compiled(torch, spec.model, "reduce-overhead")))
    for name, build in modes:
        if name.startswith("cudagraph"):
            results.append(_graphtool_capture(torch, spec, eager_step, sets, reference, timed, cuda, capture_blocked))
            continue
        if name == "compile[reduce-overhead]" and compile_mode == "reduce-overhead":
            continue
        try:
            torch._dynamo.reset()
            fn = build()
            step = make_step(torch, fn, spec.model, backward)
            torch.manual_seed(0)
            got = step(*sets[0])
            same, diff = compare(torch, reference, got)
            if not same:
                results.append(ModeResult(name, "mismatch", f"differs from eager by up to {diff:.3g}; not timed", max_abs_diff=diff))
                continue
            stats, mem = timed(name, step)
            results.append(ModeResult(name, "ok", stats=stats, max_abs_diff=diff, peak_memory_bytes=mem))
        except Exception as exc:  # noqa: BLE001 - one mode failing must not lose the others
            results.append(ModeResult(name, "error", f"{type(exc).__name__}: {_first_line(exc)}"))
    return results


def _graphtool_capture(torch, spec, eager_step, sets, reference, timed, cuda, blocked) -> ModeResult:
    name = "cudagraph replay"
    if not cuda:
        return ModeResult(name, "skipped", "no CUDA device is present: CUDA-graph capture needs one")
    if blocked:
        return ModeResult(name, "skipped", f"not capturable: {blocked}")
    try:
        static_args, static_kwargs = _clone_inputs(torch, sets[0])
        replay, _, pool = cuda_graph_step(torch, eager_step, static_args, static_kwargs)
        got = replay(*sets[0])
        same, diff = compare(torch, reference, got)
        if not same:
            return ModeResult(name, "mismatch", f"replay differs from eager by up to {diff:.3g}; not timed", max_abs_diff=diff)
        stats, mem = timed(name, replay)
        return ModeResult(name, "ok", stats=stats, max_abs_diff=diff, peak_memory_bytes=mem, pool_bytes=pool)
    except Exception as exc:  # noqa: BLE001 - a capture error is explained, the other modes kept
        return ModeResult(name, "error", f"capture failed: {type(exc).__name__}: {_first_line(exc)}")


def _clone_inputs(torch, pair):
    args, kwargs = pair

    def clone(t):
        return t.detach().clone().requires_grad_(t.requires_grad)

    return map_tensors(args, clone), map_tensors(kwargs, clone)

def _compiled(torch, model, mode: str):
    if mode in COMPILE_MODES:
        return torch.compile(model) if mode == "default" else torch.compile(model, mode=mode)
    return torch.compile(model, backend=mode)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else ""
