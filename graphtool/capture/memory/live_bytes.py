"""Live bytes while eager code runs: the eager step's forward and backward, and the optimizer's step.

A dispatch mode sees every tensor an aten op returns; a storage it has not seen (not one of the op's inputs'
storages) is an allocation of its bytes rounded to the caching allocator's 512-byte blocks, freed when torch frees
the storage (a weak reference to it expires). The peak is over the bytes live when the run began.

    >>> import torch
    >>> with LiveBytes() as live:
    ...     a = torch.ones(1000); b = a * 2; del a; c = b + 1
    >>> live.peak
    8192
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

from graphtool.capture import compat
from graphtool.capture.tensors import iter_tensors

#: the CUDA caching allocator's block granularity
BLOCK = 512


def rounded(nbytes: int) -> int:
    """Bytes as the caching allocator hands them out: a multiple of 512, at least 512 for a non-empty tensor.

    >>> rounded(0), rounded(1), rounded(512), rounded(513)
    (0, 512, 512, 1024)
    """
    return 0 if nbytes <= 0 else -(-nbytes // BLOCK) * BLOCK


class LiveBytes:
    """Context manager: ``peak`` and ``now`` (bytes allocated within it and still live)."""

    def __init__(self):
        self.now = 0
        self.peak = 0
        self._live: dict[int, tuple[Any, int]] = {}
        self._mode = None

    def _sweep(self) -> None:
        for key in [k for k, (ref, _) in self._live.items() if ref.expired()]:
            self.now -= self._live.pop(key)[1]

    def _made(self, out, args) -> None:
        weak = compat.storage_weak_ref
        inputs = set()
        for t in iter_tensors(args):
            try:
                inputs.add(weak(t).cdata)
            except Exception:
                continue
        self._sweep()
        for t in iter_tensors(out):
            try:
                ref = weak(t)
                nbytes = t.untyped_storage().nbytes()
            except Exception:
                continue
            if ref.cdata in inputs or ref.cdata in self._live:
                continue
            self._live[ref.cdata] = (ref, rounded(int(nbytes)))
            self.now += rounded(int(nbytes))
        self.peak = max(self.peak, self.now)

    def __enter__(self):
        base = compat.dispatch_mode_base()
        tracker = self

        class Tracking(base):
            supports_higher_order_operators = True

            def __torch_dispatch__(self, func, types, args=(), kwargs=None):
                out = func(*args, **(kwargs or {}))
                tracker._made(out, (args, kwargs))
                return out

        self._mode = Tracking()
        self._mode.__enter__()
        return self

    def __exit__(self, *exc):
        self._mode.__exit__(*exc)
        self._sweep()
        return False


def step_loss(out):
    """The loss a training step calls ``backward()`` on, as tests/truth/gpu/memory_truth.py takes it: the
    model's own ``out.loss`` where it computes one, else the sum of the first tensor output (in float32).
    None when no output requires grad.

    Only the loss: ones for the gradient of every output (as the trace's backward has a tangent for each) would
    also make a gradient the size of each other output, the decoder's logits (128 MiB), that no loop makes.

    >>> import torch
    >>> x = torch.ones(2, requires_grad=True)
    >>> step_loss((x * 2, x * 3)).item()
    4.0
    """
    import torch

    loss = getattr(out, "loss", None)
    if isinstance(loss, torch.Tensor) and loss.requires_grad:
        return loss
    first = next((t for t in iter_tensors(out) if t.requires_grad and t.grad_fn is not None), None)
    return first.float().sum() if first is not None else None


def eager_step_peak(spec) -> Optional[int]:
    """Peak bytes made by one eager forward and backward of ``spec`` (on fake tensors made from the model's,
    so nothing real is computed), over the parameters and inputs; the backward from :func:`step_loss`, as a
    training loop calls it, on parameters with no gradient yet (``zero_grad(set_to_none=True)``): the fake
    copies of parameters that hold one (the trace's backward leaves them) start without it, or each gradient
    would be added into the old one in place and never counted. None when the model raises there."""
    import torch

    from graphtool.capture.memory.saved_tensors import _runner

    fake = compat.fake_tensor_mode()
    try:
        run, named, _ = _runner(spec, fake)
        for t in named.values():
            t.grad = None
        with fake, torch.enable_grad(), LiveBytes() as live, compat.region_budgets_in_eager():
            out = run()
            loss = step_loss(out)
            if loss is not None:
                loss.backward()
            del out, loss
        return live.peak
    except Exception:
        return None


@dataclass(frozen=True)
class OwnStepPeaks:
    """One eager run of a step that runs its own backward and optimizer (``model = train_step``), counted live:
    bytes made over what was live when the step began, at the forward-and-backward's peak (``backward``; None for
    an optimizer's ``step`` alone) and at the peak of its optimizer's steps (``optimizer``, gradients and the
    step's outputs included); ``own``, the optimizer's steps' own peak over what was live when each began (its
    temporaries); ``state``, the bytes of the optimizers' state (each storage once)."""

    backward: Optional[int]
    optimizer: Optional[int]
    own: Optional[int]
    state: int


def own_step_peaks(spec, kind: str = "train_step") -> Optional[OwnStepPeaks]:
    """Run the step once, eagerly, as written (its own ``backward()``, ``opt.step()``, ``zero_grad``), under a
    live-bytes count split at each optimizer's ``step`` (torch's global optimizer step hooks); every parameter
    starts without a gradient, as after ``zero_grad(set_to_none=True)``, and a foreach-capable optimizer left to
    choose is stepped with ``foreach=True``, as on a GPU. Everything the step writes is put back afterwards
    (parameters, gradients, the optimizers' state). It runs on the step's own tensors: the trace already ran it,
    so its optimizer's state exists, as in every later step. None when the step raises here."""
    import torch
    from torch.optim.optimizer import register_optimizer_step_post_hook, register_optimizer_step_pre_hook

    from graphtool.capture.bench.modes import step_state
    from graphtool.capture.memory.optimizer_state import state_bytes
    from graphtool.capture.train_step import optimizers_reached
    from graphtool.capture.user.input_names import named_state

    optimizers = [opt for _name, opt in optimizers_reached(spec.model)]
    restore = step_state(torch, spec.model)
    chosen = [g for opt in optimizers for g in opt.param_groups
              if "foreach" in g and g["foreach"] is None and not g.get("fused")]
    live = LiveBytes()
    marks = {"backward": 0, "optimizer": None, "own": None, "start": 0}

    def pre(opt, args, kwargs):
        live._sweep()
        if marks["optimizer"] is None:  # the first optimizer's step ends the forward and backward
            marks["backward"] = live.peak
        marks["start"], live.peak = live.now, live.now

    def post(opt, args, kwargs):
        marks["optimizer"] = max(marks["optimizer"] or 0, live.peak)
        marks["own"] = max(marks["own"] or 0, live.peak - marks["start"])

    handles = []
    try:
        for _name, p in named_state(spec.model)[0]:
            p.grad = None
        for opt in optimizers:
            for group in opt.param_groups:
                for p in group["params"]:
                    p.grad = None
        for g in chosen:
            g["foreach"] = True
        handles = [register_optimizer_step_pre_hook(pre), register_optimizer_step_post_hook(post)]
        with torch.enable_grad(), live, compat.region_budgets_in_eager():
            out = spec.model(*spec.args, **spec.kwargs)
            del out
        if marks["optimizer"] is None:  # no optimizer's step ran
            marks["backward"] = live.peak
        state = sum(state_bytes(opt) for opt in optimizers)
    except Exception:
        return None
    finally:
        for h in handles:
            h.remove()
        for g in chosen:
            g["foreach"] = None
        restore()
    return OwnStepPeaks(None if kind == "optimizer_step" else marks["backward"], marks["optimizer"], marks["own"],
                        state)


def optimizer_step(spec) -> Optional[tuple[int, int]]:
    """``(state bytes, the step's peak bytes)`` of the script's ``get_optimizer(model)`` stepped once on the
    gradients the trace left; a foreach-capable optimizer left to choose (``foreach=None``) is stepped with
    ``foreach=True``, as it runs on a GPU. None when the script defines no ``get_optimizer``."""
    from graphtool.capture.memory.optimizer_state import state_bytes, stepped_optimizer

    def foreach_as_on_a_gpu(optimizer) -> None:
        for group in optimizer.param_groups:
            if "foreach" in group and group["foreach"] is None and not group.get("fused"):
                group["foreach"] = True

    live = LiveBytes()
    optimizer = stepped_optimizer(spec, foreach_as_on_a_gpu, lambda: live)
    if optimizer is None:
        return None
    return state_bytes(optimizer), live.peak
