"""What torch's autograd engine keeps for backward in eager mode, tensor by tensor.

The model's forward runs once on its example inputs (with grad enabled) under
``torch.autograd.graph.saved_tensors_hooks``: every tensor autograd saves passes through the pack
hook, which records it and hands it back unchanged. Nothing is changed about what is saved.

Each saved tensor is described by what made it. A dispatch mode, under autograd, notes for every
tensor an aten op returns: the op, the innermost frame outside torch (the user's file and line)
and the module whose forward was running (forward pre/post hooks keep a module stack). Tensors the
forward did not make are named by storage: parameters, buffers and example inputs (and views of
them). An op run inside ``torch.utils.checkpoint`` is marked: its results are recomputed in
backward instead of saved, and the op is listed with its line.

Storages are keyed by identity (:func:`graphtool.capture.compat.storage_key`): the pack hook keeps
every saved tensor alive until the capture ends, so no storage is freed and its key reused.

Example::

    >>> from graphtool.capture.user.script import load_model
    >>> cap = capture_saved(load_model("examples/mlp.py"))
    >>> [(s.kind, s.op, s.shape) for s in cap.saved]  # doctest: +NORMALIZE_WHITESPACE
    [('input', None, (8, 32)), ('activation', 'aten.relu.default', (8, 64)),
     ('activation', 'aten.relu.default', (8, 64)), ('parameter', 'aten.t.default', (64, 10))]
"""

from __future__ import annotations

import contextlib
import os
import sys
import weakref
from dataclasses import dataclass, field
from typing import Any

from graphtool.capture import compat
from graphtool.capture.tensors import iter_tensors
from graphtool.capture.user.input_names import all_named_inputs, named_modules, named_state
from graphtool.capture.user.script import ModelSpec, model_call_error

_THIS_FILE = os.path.normcase(os.path.abspath(__file__))


@dataclass(frozen=True)
class EagerSaved:
    """One tensor autograd saved, in the order it was saved."""

    index: int
    shape: tuple[int, ...]
    dtype: str
    tensor_bytes: int  # numel * element size
    storage: int  # storages numbered in first-seen order
    storage_bytes: int  # the whole storage's bytes
    kind: str  # activation | parameter | buffer | input
    name: str | None  # FQN of the parameter or buffer, the argument name of an input
    op: str | None  # the aten op that made it (``aten.addmm.default``, ``[i]`` for the i-th of several outputs)
    source: tuple[str, int] | None  # the user's file and line where that op ran
    module: str | None  # FQN of the module whose forward made it ("" is the model itself)
    checkpointed: bool = False  # made inside torch.utils.checkpoint


@dataclass(frozen=True)
class EagerOp:
    """An op that ran inside ``torch.utils.checkpoint``: recomputed in backward, its results not saved."""

    op: str
    source: tuple[str, int] | None
    module: str | None


@dataclass(frozen=True)
class Tensor:
    """A parameter or buffer of the model."""

    name: str
    shape: tuple[int, ...]
    dtype: str
    nbytes: int
    storage_bytes: int
    requires_grad: bool


@dataclass
class EagerCapture:
    saved: list[EagerSaved]
    checkpointed: list[EagerOp]
    parameters: list[Tensor]
    buffers: list[Tensor]
    device: str
    training: bool
    outputs_requiring_grad: int = 0
    notes: list[str] = field(default_factory=list)
    #: why nothing was recorded: torch cannot run the forward eagerly the way graphtool watches it (a higher-order
    #: op); ``saved`` is then empty and only the parameters and buffers are known
    not_measured: str | None = None


def _dtype(t) -> str:
    return str(t.dtype).replace("torch.", "")


def _storage_bytes(t) -> int:
    try:
        return int(t.untyped_storage().nbytes())
    except Exception:  # a tensor without storage (sparse, nested, some subclasses)
        return 0


def _key(t):
    try:
        return compat.storage_key(t)
    except Exception:
        return None


def _torch_dir() -> str:
    import torch

    return os.path.normcase(os.path.dirname(os.path.abspath(torch.__file__))) + os.sep


class _Origins:
    """Where each tensor came from: written by the dispatch mode, read by the pack hook."""

    def __init__(self, torch_dir: str, checkpoint_file: str):
        self.torch_dir = torch_dir
        self.checkpoint_file = checkpoint_file
        self.module_stack: list[str] = []
        self.by_id: dict[int, tuple[Any, tuple]] = {}
        self.by_view: dict[tuple, tuple] = {}
        self.checkpointed: list[EagerOp] = []
        self._files: dict[str, tuple[bool, bool]] = {}

    def _kind_of_file(self, filename: str) -> tuple[bool, bool]:
        """(outside torch and this file, is torch.utils.checkpoint) for a code object's file."""
        got = self._files.get(filename)
        if got is None:
            norm = os.path.normcase(os.path.abspath(filename)) if not filename.startswith("<") else filename
            user = not norm.startswith(self.torch_dir) and norm != _THIS_FILE
            got = (user, norm == self.checkpoint_file)
            self._files[filename] = got
        return got

    def where(self) -> tuple[tuple[str, int] | None, bool]:
        """The innermost user frame, and whether torch.utils.checkpoint is running."""
        frame = sys._getframe(2)
        source = None
        in_checkpoint = False
        while frame is not None:
            code = frame.f_code
            user, ckpt = self._kind_of_file(code.co_filename)
            if user and source is None:
                source = (code.co_filename, frame.f_lineno)
            if ckpt:
                in_checkpoint = True
                break
            frame = frame.f_back
        return source, in_checkpoint

    def made(self, func, out) -> None:
        source, in_checkpoint = self.where()
        module = self.module_stack[-1] if self.module_stack else None
        name = str(func)
        outs = list(iter_tensors(out))
        if in_checkpoint:
            self.checkpointed.append(EagerOp(name, source, module))
        for i, t in enumerate(outs):
            record = (name if len(outs) == 1 else f"{name}[{i}]", source, module, in_checkpoint)
            try:
                self.by_id[id(t)] = (weakref.ref(t), record)
            except TypeError:
                continue
            key = _key(t)
            if key is not None:
                self.by_view[(key, t.storage_offset(), tuple(t.shape), tuple(t.stride()))] = record

    def origin(self, t) -> tuple | None:
        got = self.by_id.get(id(t))
        if got is not None and got[0]() is t:
            return got[1]
        key = _key(t)
        if key is None:
            return None
        return self.by_view.get((key, t.storage_offset(), tuple(t.shape), tuple(t.stride())))


def _mode_class():
    base = compat.dispatch_mode_base()

    class RecordOrigins(base):
        """Notes what made every tensor an aten op returns; changes nothing."""

        def __init__(self, origins: _Origins):
            super().__init__()
            self.origins = origins

        supports_higher_order_operators = True  # torch.cond, map, while_loop... pass through

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            if compat.higher_order_name(func) is None:  # a higher-order op's own ops are not seen here
                self.origins.made(func, out)
            return out

    return RecordOrigins


def _named_storages(spec: ModelSpec, named: dict, inputs: list) -> tuple[dict, list[Tensor], list[Tensor]]:
    """storage key -> (kind, name) for parameters, buffers and example inputs; the parameters and buffers."""

    owners: dict = {}
    params, buffers = [], []
    if named:
        kinds = {fqn: "parameter" for fqn, _ in named_state(spec.model)[0]}
        seen = set()
        for fqn, t in named.items():
            kind = kinds.get(fqn, "buffer")
            owners.setdefault(_key(t), (kind, fqn))
            if id(t) in seen:
                continue
            seen.add(id(t))
            record = Tensor(fqn, tuple(t.shape), _dtype(t), t.numel() * t.element_size(), _storage_bytes(t),
                            bool(t.requires_grad))
            (params if kind == "parameter" else buffers).append(record)
    for name, t in inputs:
        owners.setdefault(_key(t), ("input", name))
    owners.pop(None, None)
    return owners, params, buffers


def higher_order_unmeasured(exc: BaseException, hop: str) -> str:
    """Why the eager column of a model whose forward runs ``hop`` is empty, in words, with the user's line and
    torch's own error: eager ``torch.cond`` whose branch reads a tensor it is not handed (a submodule's
    parameter) fails under any dispatch mode (torch 2.13, 2.15), and graphtool's eager recording is one."""
    from graphtool.capture.user.boundary import user_frames
    from graphtool.display_paths import display_path

    frames = user_frames(exc)
    where = f" at {display_path(frames[-1].filename)}:{frames[-1].lineno}" if frames else ""
    what = f"torch.{hop}" if hop in ("cond", "while_loop", "map") else hop
    said = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    said = said.split(". Found in ")[0][:160]
    return (f"{what}{where} does not run eagerly under the dispatch mode graphtool records autograd's saved tensors "
            f"with (torch: {type(exc).__name__}: {said})")


def _module_hooks(spec: ModelSpec, origins: _Origins) -> list:

    hooks = []
    for fqn, mod in named_modules(spec.model):  # a function's global modules too
        def pre(mod, args, fqn=fqn):
            origins.module_stack.append(fqn)

        def post(mod, args, out, fqn=fqn):
            if origins.module_stack and origins.module_stack[-1] == fqn:
                origins.module_stack.pop()
            elif fqn in origins.module_stack:  # an exception skipped inner hooks: unwind to this one
                del origins.module_stack[origins.module_stack.index(fqn):]

        hooks.append(mod.register_forward_pre_hook(pre))
        hooks.append(mod.register_forward_hook(post, always_call=True))
    return hooks


def capture_saved(spec: ModelSpec) -> EagerCapture:
    """Run ``spec``'s forward once, eagerly, and record every tensor autograd saves for backward.

    A model on the meta device runs on fake tensors made from its meta ones (the same shapes,
    dtypes and storage sharing, no data), so code that checks for tracing skips its ``.item()``
    calls as it does under torch.compile."""
    torch = compat.import_torch()
    import torch.utils.checkpoint as checkpoint_module

    origins = _Origins(_torch_dir(), os.path.normcase(os.path.abspath(checkpoint_module.__file__)))
    fake = _on_meta(spec)
    run, named, swapped = _runner(spec, fake)
    inputs = [(name, swapped.get(id(t), t)) for name, t in all_named_inputs(spec)]
    owners, params, buffers = _named_storages(spec, named, inputs)
    storages: dict = {}
    saved: list[EagerSaved] = []
    keep: list = []

    def pack(t):
        keep.append(t)
        key = _key(t)
        number = storages.setdefault(key, len(storages)) if key is not None else len(storages) + len(saved)
        kind, name = owners.get(key, ("activation", None)) if key is not None else ("activation", None)
        origin = origins.origin(t)
        op, source, module, ckpt = origin if origin is not None else (None, None, None, False)
        if kind != "activation" and op is None:
            module = None
        saved.append(EagerSaved(
            index=len(saved), shape=tuple(int(s) for s in t.shape), dtype=_dtype(t),
            tensor_bytes=t.numel() * t.element_size(), storage=number, storage_bytes=_storage_bytes(t),
            kind=kind, name=name, op=op, source=source, module=module, checkpointed=bool(ckpt),
        ))
        return t

    def unpack(t):
        return t

    hooks = _module_hooks(spec, origins)
    record = _mode_class()(origins)
    out = None
    try:
        with torch.enable_grad(), (fake or contextlib.nullcontext()), record, \
                torch.autograd.graph.saved_tensors_hooks(pack, unpack), compat.region_budgets_in_eager() as budgets:
            out = run()
    except Exception as exc:
        hop = compat.higher_order_in_traceback(exc)
        if hop is not None:  # graphtool's limit, not the model's: the compiled side is still measured
            device = "meta" if fake else next((t.device.type for _, t in named.items()), "cpu")
            return EagerCapture([], [], params, buffers, device, _training(spec, params), 0,
                                not_measured=higher_order_unmeasured(exc, hop))
        raise model_call_error(spec, exc, "the model raised on its example inputs"
                               + (" (run on fake tensors made from its meta ones)" if fake else "")) from None
    finally:
        for h in hooks:
            h.remove()
    wanting = sum(1 for t in iter_tensors(out) if t.requires_grad)
    training = _training(spec, params)
    device = next((str(t.device.type) for t in iter_tensors(out)), "meta" if fake else "cpu")
    keep.clear()  # the saved tensors go with the forward's graph
    notes = [_region_budget_note(budgets.entered)] if budgets.entered else []
    return EagerCapture(saved, origins.checkpointed, params, buffers, device, training, wanting, notes)


def _training(spec: ModelSpec, params: list[Tensor]) -> bool:
    return any(p.requires_grad for p in params) or any(t.requires_grad for t in iter_tensors((spec.args, spec.kwargs)))


def _region_budget_note(entered) -> str:
    from graphtool.display_paths import display_path

    where = sorted({f"region_activation_memory_budget({b!r}) at {display_path(f)}:{line}" for b, f, line in entered})
    return ("eager: " + ", ".join(where) + " has no effect in eager mode (torch raises there, outside "
            "torch.compile); the eager column is the model run without it, the compiled column honours it")


def _on_meta(spec: ModelSpec):
    """A fake tensor mode when the model or its inputs live on meta, else None."""

    tensors = list(iter_tensors((spec.args, spec.kwargs)))
    params, buffers = named_state(spec.model)
    tensors += [t for _, t in params + buffers]
    return compat.fake_tensor_mode() if any(t.device.type == "meta" for t in tensors) else None


def _runner(spec: ModelSpec, fake):
    """``(run, named, swapped)``: what calls the forward; the model's parameters and buffers by FQN as
    that forward sees them; id(real tensor) -> the fake tensor standing for it (on meta, where fake
    tensors are swapped in with ``torch.func.functional_call``)."""
    import torch

    params, buffers = named_state(spec.model)  # a function's global modules' state too
    named: dict[str, Any] = dict(params + buffers)
    if fake is None:
        return (lambda: spec.model(*spec.args, **spec.kwargs)), named, {}
    from graphtool.capture.tensors import map_tensors

    swapped: dict[int, Any] = {}
    originals = []  # the real tensors, alive while their ids are keys

    def to_fake(t):
        if id(t) not in swapped:
            originals.append(t)
            swapped[id(t)] = fake.from_tensor(t)
        return swapped[id(t)]

    named = {fqn: to_fake(t) for fqn, t in named.items()}
    args, kwargs = map_tensors((spec.args, spec.kwargs), to_fake)
    module = spec.model if isinstance(spec.model, torch.nn.Module) else _function_holder(spec.model)
    return (lambda: torch.func.functional_call(module, named, args, kwargs, tie_weights=True, strict=False)), \
        named, swapped


def _function_holder(fn):
    """An ``nn.Module`` whose forward is the plain function ``fn`` and whose submodules are the global
    modules it calls, under their names: ``functional_call`` swaps their tensors the way it swaps a model's."""
    import torch

    from graphtool.capture.user.input_names import reached_state

    class FunctionHolder(torch.nn.Module):
        def forward(self, *args, **kwargs):
            return fn(*args, **kwargs)

    holder = FunctionHolder()
    for name, obj in reached_state(fn):
        if isinstance(obj, torch.nn.Module):
            holder.add_module(name, obj)
    return holder


def mark_varying_sizes(spec: ModelSpec) -> list[str]:
    """For ``--dynamic``: mark every input dimension that differs between the example inputs and
    their variant (the script's ``dynamic_inputs`` or ``dynamic_dims``, else token ids one longer, else the batch grown by one) as dynamic, so the
    trace of the example inputs has symbolic sizes there (their hints: the example's sizes).
    Returns them as ``x.size(0)``."""
    from graphtool.capture.dynamic_inputs import dynamic_variant

    args, kwargs = dynamic_variant(spec)
    marked = []
    pairs = zip(all_named_inputs(spec), list(iter_tensors((args, kwargs))))
    for (name, t), other in pairs:
        if t.dim() != other.dim():
            continue
        for dim, (a, b) in enumerate(zip(t.shape, other.shape)):
            if a != b:
                compat.maybe_mark_dynamic(t, dim)
                marked.append(f"{name}.size({dim})")
    return marked
