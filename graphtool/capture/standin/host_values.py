"""Concrete values for the stand-in's host syncs, recorded from a real run.

Eager code between compiled regions can need data: ``.item()``, ``int(t)``, ``.tolist()``, ``if
t.sum() > 0``. On the meta stand-in there is none, so the stand-in trace stopped there and later
regions went unjudged. A run on the model's own device records each value such a call returns, in
order; the stand-in run then gets the same values back in the same order, takes the same path,
and dynamo compiles the same regions. Dynamo handles these methods by name while tracing, so the
patch changes nothing it compiles; it only answers eager code.

Only the reads of the model's own code count (its file, a library such as transformers, torch.nn's
own checks like ``if key_padding_mask.any():``): torch.compile's machinery reads values too (dynamo's
fake runs, inductor's constant folding) and those calls pass through untouched, so the two runs'
sequences line up. A value is replayed with the type its protocol needs: ``__bool__`` a bool,
``__int__``/``__index__`` an int, ``__float__`` a float, ``.item()`` the Python scalar of the tensor's
dtype, ``.tolist()`` lists nested as deep as the tensor has dimensions, and a 0-d tensor's ``__format__``
(``f"expert_{idx[0]}"``, which reads its ``.item()`` on a real device) that value formatted.

Example::

    >>> import torch
    >>> values = HostValues()
    >>> with values.recording():
    ...     n = torch.tensor(3).item()
    >>> with values.replaying():
    ...     torch.empty(1, dtype=torch.long, device="meta").item()
    3
"""

from __future__ import annotations

import collections
import contextlib
from typing import Any

#: the Tensor methods through which eager code reads a tensor's data on the host
HOST_SYNC_METHODS = ("item", "tolist", "__bool__", "__int__", "__float__", "__index__", "__format__")


class ValuesRanOut(RuntimeError):
    """The stand-in asked for more host values than the real run produced: the paths differ."""

    stands_in_for_torch = True  # raised on purpose inside the trace: not a bug in graphtool


class HostValues:
    """Host values in the order a real run read them; replayed for meta tensors only."""

    def __init__(self):
        self.values: collections.deque = collections.deque()
        self.replayed = 0

    @contextlib.contextmanager
    def recording(self):
        with self._patched(self._record):
            yield self

    @contextlib.contextmanager
    def replaying(self):
        with self._patched(self._replay):
            yield self

    def _record(self, original, tensor, *args, **kwargs) -> Any:
        value = original(tensor, *args, **kwargs)
        # a 0-d tensor formats its .item() (f"expert_{idx[0]}"): that read is the one recorded
        if original.__name__ != "__format__" and not _compile_machinery(tensor):
            self.values.append(value)
        return value

    def _replay(self, original, tensor, *args, **kwargs) -> Any:
        if tensor.device.type != "meta" or _compile_machinery(tensor):
            return original(tensor, *args, **kwargs)
        if original.__name__ == "__format__" and tensor.dim() != 0:  # torch formats these without reading values
            return original(tensor, *args, **kwargs)
        if not self.values:
            raise ValuesRanOut("the stand-in read more host values than the run on the model's own device did")
        self.replayed += 1
        return as_protocol(original.__name__, tensor, self.values.popleft(), *args)

    @contextlib.contextmanager
    def _patched(self, handler):
        import torch

        originals = {name: getattr(torch.Tensor, name) for name in HOST_SYNC_METHODS}


        def wrap(name, original):
            def method(tensor, *args, **kwargs):
                return handler(original, tensor, *args, **kwargs)

            method.__name__ = method.__qualname__ = name
            # called from a compiled frame's eager part, dynamo would compile this frame too: keep it eager
            return torch.compiler.disable(method)

        try:
            for name, original in originals.items():
                setattr(torch.Tensor, name, wrap(name, original))
            yield
        finally:
            for name, original in originals.items():
                setattr(torch.Tensor, name, original)


def _compile_machinery(tensor) -> bool:
    """Whether torch.compile itself is reading this value: dynamo running a node on fake tensors, or a
    backend compiling (inductor's constant folding reads constants) while a tracing context is active."""
    from graphtool.capture import compat

    return compat.is_fake_tensor(tensor) or compat.tracing_context_active()


def as_protocol(name: str, tensor, value: Any, *args) -> Any:
    """``value`` (recorded on the own device) with the type ``tensor.<name>()`` must return.

    >>> import torch
    >>> t = torch.empty((), device="meta")
    >>> as_protocol("__bool__", t, 1.0), as_protocol("__index__", t, 2.0), as_protocol("__float__", t, True)
    (True, 2, 1.0)
    >>> as_protocol("tolist", torch.empty(2, 1, dtype=torch.long, device="meta"), [3, 4])
    [[3], [4]]
    >>> as_protocol("item", torch.empty((), device="meta"), 3)  # a float tensor's item() is a float
    3.0
    """
    if name == "__bool__":
        return bool(value)
    if name in ("__int__", "__index__"):
        return int(value)
    if name == "__float__":
        return float(value)
    if name == "item":
        return _scalar(tensor.dtype, value)
    if name == "tolist":
        return _nested(tensor, value)
    if name == "__format__":
        return format(_scalar(tensor.dtype, value), *args)
    return value


def _scalar(dtype, value: Any) -> Any:
    import torch

    while isinstance(value, list) and len(value) == 1:
        value = value[0]
    if dtype == torch.bool:
        return bool(value)
    if dtype.is_complex:
        return complex(value)
    if dtype.is_floating_point:
        return float(value)
    return int(value)


def _flat(value: Any) -> list:
    if isinstance(value, (list, tuple)):
        return [x for v in value for x in _flat(v)]
    return [value]


def _nested(tensor, value: Any) -> Any:
    """``value`` as ``tensor.tolist()`` would nest it: a scalar for 0-d, lists as deep as the shape."""
    shape = list(tensor.shape)
    flat = [_scalar(tensor.dtype, v) for v in _flat(value)]
    if not shape:
        return flat[0] if flat else value

    def build(dims: list, items: list) -> list:
        if len(dims) == 1:
            return items
        step = len(items) // dims[0] if dims[0] else 0
        return [build(dims[1:], items[i * step:(i + 1) * step]) for i in range(dims[0])]

    total = 1
    for d in shape:
        total *= d
    return build(shape, flat) if len(flat) == total else value
