"""An accelerator stand-in: the model and its inputs moved to the meta device.

This machine (and CI) has no GPU, and faking CUDA on a CPU build of torch can abort the
interpreter. The meta device does the job safely: a trace on meta keeps every op the user's code
puts on the CPU (``.cpu()`` becomes ``_to_copy`` to cpu, ``torch.tensor(2.0)`` a cpu constant),
which a CPU trace cannot show since ``.cpu()`` is a no-op there. Meta then stands for ``cuda:0``.

Every tensor the model reaches moves, not only parameters, buffers and the tensors in the inputs'
tuples, lists and dicts: a real CPU tensor left in a cache object or a module's plain attribute
would meet the trace's fake meta tensors and stop it (see :class:`MetaMover`).
"""

from __future__ import annotations

import enum
import functools
import types
import weakref
from dataclasses import replace
from typing import Any

from graphtool.capture.script import ModelSpec


def accelerator_of(spec: ModelSpec) -> str:
    """``cuda`` when the model already lives on a GPU, else ``meta`` (the stand-in)."""
    from graphtool.capture.tensors import iter_tensors

    tensors = list(spec.model.parameters()) if hasattr(spec.model, "parameters") else []
    tensors += list(iter_tensors((spec.args, spec.kwargs)))
    return "cuda" if any(t.device.type == "cuda" for t in tensors) else "meta"


def to_meta(spec: ModelSpec) -> ModelSpec:
    """Move every tensor the model and its example inputs reach to meta; see :class:`MetaMover`.

    The model and the objects it holds change in place (graphtool loads the script afresh for each
    trace); tuples are rebuilt, so the returned spec carries the moved inputs."""
    mover = MetaMover()
    model = mover.move(spec.model)
    return replace(spec, model=model, args=mover.move(spec.args), kwargs=mover.move(spec.kwargs))


#: how far the walk follows attributes and containers from the model or an input
MAX_DEPTH = 12
#: where a module keeps what ``Module.to`` moves itself
_MODULE_REGISTRIES = frozenset({"_parameters", "_buffers", "_modules"})


class MetaMover:
    """Moves every tensor reachable from the values it is given to meta, each tensor once.

    Parameters and buffers move with ``Module.to``; every other tensor is found by walking plain
    attributes (``__dict__`` and slots), dataclasses, lists, tuples and dicts, and is replaced where
    it lives: a module's plain tensor attribute, a cache object's per-layer ``keys`` (transformers'
    ``StaticCache.layers[i].keys``), a list element. Identity is kept: a tensor reached twice (an
    input that is also a parameter, two caches sharing a tensor) becomes the same meta tensor, and a
    view stays a view of its moved base. ``requires_grad`` and the tensor's Python attributes
    (``mark_static_address``'s ``_dynamo_static_input_type``, ``mark_dynamic``'s indices) move along.

    >>> import torch
    >>> class Layer:
    ...     def __init__(self, t):
    ...         self.keys, self.device = t, t.device
    >>> t = torch.zeros(2, 3)
    >>> layers, same = MetaMover().move(([Layer(t)], t))
    >>> layers[0].keys.device, layers[0].device, layers[0].keys is same
    (device(type='meta'), device(type='meta'), True)
    """

    def __init__(self, max_depth: int = MAX_DEPTH):
        self.max_depth = max_depth
        # id(original) -> (original, its stand-in); holding the original keeps its id from being reused
        self._done: dict[int, tuple[Any, Any]] = {}

    def move(self, obj: Any, depth: int = 0) -> Any:
        """``obj`` with its tensors on meta: a new tensor or tuple, else ``obj`` itself, changed in place."""
        import torch

        if isinstance(obj, torch.Tensor):
            return self._tensor(obj)
        if depth > self.max_depth or _is_leaf(obj):
            return obj
        if id(obj) in self._done:
            return self._done[id(obj)][1]
        if isinstance(obj, torch.nn.Module):
            return self._module(obj, depth)
        if isinstance(obj, tuple):
            return self._tuple(obj, depth)
        self._done[id(obj)] = (obj, obj)  # changed in place: marked first, so a cycle ends here
        if isinstance(obj, list):
            for i, value in enumerate(list(obj)):
                self._replace(value, depth, lambda new, i=i: list.__setitem__(obj, i, new))
        elif isinstance(obj, dict):
            for key, value in list(obj.items()):
                self._replace(value, depth, lambda new, key=key: dict.__setitem__(obj, key, new))
        if isinstance(obj, types.MethodType):  # a bound ``forward``: its module holds the tensors
            self.move(obj.__self__, depth + 1)
        else:
            self._attributes(obj, depth)
        return obj

    def _replace(self, value: Any, depth: int, put) -> bool:
        """Move ``value`` and ``put`` the result back where it was, when it changed."""
        new = self.move(value, depth + 1)
        if new is not value:
            put(new)
        return new is not value

    def _attributes(self, obj: Any, depth: int) -> None:
        import torch

        left: set = set()  # the devices this object's own tensors were moved from
        for name, value in _fields(obj):
            changed = self._replace(value, depth, lambda new, name=name: _set_field(obj, name, new))
            if changed and isinstance(value, torch.Tensor):
                left.add(value.device)
        if left and not isinstance(obj, torch.nn.Module):
            # A cache layer records where its tensors live (``self.device``) and makes new ones there
            # (``torch.arange(n, device=self.device)``): on a GPU that is the GPU, so it follows them.
            for name, value in _fields(obj):
                if isinstance(value, torch.device) and value in left:
                    _set_field(obj, name, torch.device("meta"))

    def _tensor(self, t):
        import torch

        if id(t) in self._done:
            return self._done[id(t)][1]
        if t.device.type == "meta":
            moved = t
        elif t._base is not None:  # a view of another tensor: view the moved base the same way
            base = self._tensor(t._base).detach()
            moved = base.as_strided(t.size(), t.stride(), t.storage_offset())
        elif isinstance(t, torch.nn.Parameter):  # dynamo treats parameters as static: keep the type
            moved = torch.nn.Parameter(t.detach().to("meta"), requires_grad=t.requires_grad)
        else:
            moved = t.detach().to("meta")
        if t.requires_grad and moved.is_leaf and not moved.requires_grad:
            moved.requires_grad_(True)
        self._done[id(t)] = (t, moved)
        self._copy_marks(t, moved)
        return moved

    def _copy_marks(self, old, new) -> None:
        """A tensor's Python attributes (dynamo's marks among them) onto its stand-in."""
        if new is old:
            return
        for name, value in list(vars(old).items()):
            if name not in vars(new):
                setattr(new, name, self.move(value, self.max_depth))

    def _module(self, module, depth: int):
        before = _registered_tensors(module)
        module.to("meta")
        after = _registered_tensors(module)
        for name, old in before.items():
            self._done[id(old)] = (old, after[name])
            self._copy_marks(old, after[name])
        subs = list(module.modules())
        for sub in subs:
            self._done[id(sub)] = (sub, sub)
        for sub in subs:  # what Module.to leaves behind: plain attributes holding tensors
            for name, value in list(vars(sub).items()):
                if name not in _MODULE_REGISTRIES:
                    self._replace(value, depth, lambda new, sub=sub, name=name: vars(sub).__setitem__(name, new))
        return module

    def _tuple(self, obj: tuple, depth: int) -> tuple:
        items = [self.move(v, depth + 1) for v in obj]
        new = obj
        if any(a is not b for a, b in zip(items, obj)):
            new = _rebuild_tuple(obj, items)
        self._done[id(obj)] = (obj, new)
        return new


def _registered_tensors(module) -> dict:
    """Every parameter and buffer by its qualified name, shared ones under each name."""
    found = dict(module.named_parameters(remove_duplicate=False))
    found.update(module.named_buffers(remove_duplicate=False))
    return found


def _rebuild_tuple(obj: tuple, items: list) -> tuple:
    """A tuple of ``obj``'s type holding ``items``: plain, named, or a structseq (``torch.return_types``)."""
    if type(obj) is tuple:
        return tuple(items)
    if hasattr(obj, "_fields"):
        return type(obj)(*items)
    try:
        return type(obj)(items)
    except TypeError:  # a tuple type that cannot be rebuilt from its items: keep it as it was
        return obj


def _fields(obj: Any):
    """``(name, value)`` for an object's instance attributes: its ``__dict__``, then its slots."""
    own = getattr(obj, "__dict__", None)
    if isinstance(own, dict):
        yield from list(own.items())
    for cls in type(obj).__mro__:
        slots = cls.__dict__.get("__slots__", ())
        for name in (slots,) if isinstance(slots, str) else slots:
            if name in ("__dict__", "__weakref__"):
                continue
            try:
                yield name, getattr(obj, name)
            except AttributeError:  # a slot never assigned
                continue


def _set_field(obj: Any, name: str, value: Any) -> None:
    """Set an attribute without the class's ``__setattr__`` (frozen dataclasses, ``Module``)."""
    own = getattr(obj, "__dict__", None)
    if isinstance(own, dict) and name in own:
        own[name] = value
    else:
        object.__setattr__(obj, name, value)


@functools.cache
def _leaf_types() -> tuple:
    import torch

    return (
        type(None), bool, int, float, complex, str, bytes, bytearray, range, slice, type(Ellipsis),
        set, frozenset, enum.Enum, type, types.ModuleType, types.FunctionType, types.BuiltinFunctionType,
        types.CodeType, functools.partial, weakref.ref, torch.dtype, torch.device, torch.Size, torch.layout,
        torch.memory_format, torch.Generator,
    )


def _is_leaf(obj: Any) -> bool:
    """Values the walk does not enter: scalars, strings, types, functions, torch's descriptors.

    >>> _is_leaf("x"), _is_leaf(len), _is_leaf([1])
    (True, True, False)
    """
    return isinstance(obj, _leaf_types())


def standin_mode():
    """A dispatch mode for running stand-in graphs: meta->cpu copies yield CPU zeros.

    Used only inside compiled graphs (dynamo compiles nothing while a dispatch mode is active),
    so a graph whose ``.cpu()`` result feeds later CPU ops can still run on meta.
    """
    import torch

    from graphtool.capture import compat

    aten = torch.ops.aten
    device_put = torch.ops.prims.device_put.default

    class _StandinMode(compat.dispatch_mode_base()):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            src = args[0] if args else None
            if isinstance(src, torch.Tensor) and src.device.type == "meta":
                if func is aten._to_copy.default:
                    dev = kwargs.get("device")
                    if dev is not None and torch.device(dev).type != "meta":
                        return torch.zeros(src.shape, dtype=kwargs.get("dtype") or src.dtype, device=dev)
                if func is device_put:  # .cpu() as inductor's decompositions write it
                    dev = args[1] if len(args) > 1 else kwargs.get("device")
                    if dev is not None and torch.device(dev).type != "meta":
                        return torch.zeros(src.shape, dtype=src.dtype, device=dev)
                if func is aten._local_scalar_dense.default:
                    return torch.zeros((), dtype=src.dtype).item()
            if func is aten.copy_.default and len(args) > 1 and isinstance(args[1], torch.Tensor):
                if args[1].device.type == "meta" and args[0].device.type != "meta":
                    return args[0]
            return func(*args, **kwargs)

    return _StandinMode()


def copy_to_meta(spec: ModelSpec) -> ModelSpec:
    """A stand-in copy of a model the caller handed over as an object: nothing of theirs changes.

    The model and its inputs are deep-copied with every tensor :class:`MetaMover` reaches already
    mapped to its meta stand-in, so no tensor's data is copied and the originals are untouched
    (parameters, buffers, caches, gradients); tied weights stay tied and ``mark_static_address``
    marks move along, as :func:`to_meta` does. A tensor the walk does not reach is copied by
    ``deepcopy`` and then moved on the copy, which is graphtool's own.

    >>> import torch
    >>> from pathlib import Path
    >>> lin = torch.nn.Linear(2, 2)
    >>> spec = ModelSpec(Path("m.py"), "m", lin, (torch.ones(1, 2),), borrowed=True)
    >>> copy = copy_to_meta(spec)
    >>> copy.model.weight.device, lin.weight.device, copy.model is lin
    (device(type='meta'), device(type='cpu'), False)
    """
    import copy

    from graphtool.errors import BadModelSpec

    found: dict[int, Any] = {}
    _reachable_tensors((spec.model, spec.args, spec.kwargs), found, set(), 0)
    mover = MetaMover()
    memo: dict[int, Any] = {tid: mover._tensor(t) for tid, t in found.items()}
    memo[id(memo)] = list(found.values())  # deepcopy's keep-alive list: the originals' ids stay theirs
    try:
        model, args, kwargs = copy.deepcopy((spec.model, spec.args, spec.kwargs), memo)
    except Exception as exc:  # a lock, a file, a process group: objects Python cannot copy
        raise BadModelSpec(
            f"{spec.location}: graphtool needs a copy of the model for the accelerator stand-in, and Python could not "
            f"copy it: {type(exc).__name__}: {exc}",
            hint="pass a model built on the meta device (device='meta'), or run graphtool on a script",
        ) from None
    rest = MetaMover()
    return replace(spec, model=rest.move(model), args=rest.move(args), kwargs=rest.move(kwargs), borrowed=False)


def _reachable_tensors(obj: Any, found: dict, seen: set, depth: int) -> None:
    """Every tensor :class:`MetaMover` would move from ``obj``, by id, without changing anything."""
    import torch

    if isinstance(obj, torch.Tensor):
        if id(obj) not in found:
            found[id(obj)] = obj
            for value in vars(obj).values():  # dynamo's marks, and whatever else rides on the tensor
                _reachable_tensors(value, found, seen, MAX_DEPTH)
        return
    if depth > MAX_DEPTH or _is_leaf(obj) or id(obj) in seen:
        return
    seen.add(id(obj))
    if isinstance(obj, torch.nn.Module):
        for t in _registered_tensors(obj).values():
            _reachable_tensors(t, found, seen, depth + 1)
        for sub in obj.modules():
            seen.add(id(sub))
            for name, value in list(vars(sub).items()):
                if name not in _MODULE_REGISTRIES:
                    _reachable_tensors(value, found, seen, depth + 1)
        return
    if isinstance(obj, (list, tuple)):
        for value in obj:
            _reachable_tensors(value, found, seen, depth + 1)
    elif isinstance(obj, dict):
        for value in list(obj.values()):
            _reachable_tensors(value, found, seen, depth + 1)
    if isinstance(obj, types.MethodType):
        _reachable_tensors(obj.__self__, found, seen, depth + 1)
    elif not isinstance(obj, tuple):
        for _, value in _fields(obj):
            _reachable_tensors(value, found, seen, depth + 1)
