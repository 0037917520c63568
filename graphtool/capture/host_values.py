"""Concrete values for the stand-in's host syncs, recorded from a real run.

Eager code between compiled regions can need data: ``.item()``, ``int(t)``, ``.tolist()``, ``if
t.sum() > 0``. On the meta stand-in there is none, so the stand-in trace stopped there and later
regions went unjudged. A run on the model's own device records each value such a call returns, in
order; the stand-in run then gets the same values back in the same order, takes the same path,
and dynamo compiles the same regions. Dynamo handles these methods by name while tracing, so the
patch changes nothing it compiles; it only answers eager code.

Example::

    >>> import torch
    >>> values = HostValues()
    >>> with values.recording():
    ...     n = torch.tensor(3).item()
    >>> with values.replaying():
    ...     torch.empty(1, device="meta").item()
    3
"""

from __future__ import annotations

import collections
import contextlib
from typing import Any

#: the Tensor methods through which eager code reads a tensor's data on the host
HOST_SYNC_METHODS = ("item", "tolist", "__bool__", "__int__", "__float__", "__index__")


class ValuesRanOut(RuntimeError):
    """The stand-in asked for more host values than the real run produced: the paths differ."""


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
        self.values.append(value)
        return value

    def _replay(self, original, tensor, *args, **kwargs) -> Any:
        if tensor.device.type != "meta":
            return original(tensor, *args, **kwargs)
        if not self.values:
            raise ValuesRanOut("the stand-in read more host values than the run on the model's own device did")
        self.replayed += 1
        return self.values.popleft()

    @contextlib.contextmanager
    def _patched(self, handler):
        import torch

        originals = {name: getattr(torch.Tensor, name) for name in HOST_SYNC_METHODS}

        def wrap(name, original):
            def method(tensor, *args, **kwargs):
                return handler(original, tensor, *args, **kwargs)

            method.__name__ = method.__qualname__ = name
            return method

        try:
            for name, original in originals.items():
                setattr(torch.Tensor, name, wrap(name, original))
            yield
        finally:
            for name, original in originals.items():
                setattr(torch.Tensor, name, original)
