"""Walk and rebuild the nested containers (tuples, lists, dicts, model outputs) that hold tensors."""

from __future__ import annotations

import dataclasses
from typing import Any


def iter_tensors(obj: Any, _depth: int = 0):
    """Every tensor in ``obj``, in order: nested tuples, lists and dicts, dataclasses, transformers'
    ModelOutput, and any container registered with torch's pytree (the containers dynamo itself
    walks when it returns a model's output)."""
    import torch

    if isinstance(obj, torch.Tensor):
        yield obj
    elif _depth > 20 or obj is None or isinstance(obj, (str, bytes, int, float, bool, type)):
        return
    elif isinstance(obj, dict):
        for v in obj.values():
            yield from iter_tensors(v, _depth + 1)
    elif isinstance(obj, (list, tuple)):
        for v in obj:
            yield from iter_tensors(v, _depth + 1)
    elif hasattr(obj, "to_tuple"):  # transformers' ModelOutput
        yield from iter_tensors(obj.to_tuple(), _depth + 1)
    elif dataclasses.is_dataclass(obj):
        for f in dataclasses.fields(obj):
            yield from iter_tensors(getattr(obj, f.name, None), _depth + 1)
    else:
        from graphtool.capture import compat

        for child in compat.pytree_children(obj) or ():
            yield from iter_tensors(child, _depth + 1)


def named_tensors(obj: Any, prefix: str, _depth: int = 0):
    """``(path, tensor)`` for every tensor in ``obj``: ``x``, ``inputs[0]``, ``mask['a']``."""
    import torch

    if isinstance(obj, torch.Tensor):
        yield prefix, obj
    elif _depth > 20:
        return
    elif isinstance(obj, dict):
        for k, v in obj.items():
            yield from named_tensors(v, f"{prefix}[{k!r}]", _depth + 1)
    elif isinstance(obj, (list, tuple)):
        for i, v in enumerate(obj):
            yield from named_tensors(v, f"{prefix}[{i}]", _depth + 1)


def map_tensors(obj: Any, fn, _depth: int = 0) -> Any:
    """Rebuild nested tuples, lists and dicts with ``fn`` applied to every tensor.

    >>> map_tensors((1, [2], {"a": 3}), lambda t: t)   # no tensors: the same structure back
    (1, [2], {'a': 3})
    """
    import torch

    if isinstance(obj, torch.Tensor):
        return fn(obj)
    if _depth > 20:
        return obj
    if isinstance(obj, tuple):
        return tuple(map_tensors(o, fn, _depth + 1) for o in obj)
    if isinstance(obj, list):
        return [map_tensors(o, fn, _depth + 1) for o in obj]
    if isinstance(obj, dict):
        return {k: map_tensors(v, fn, _depth + 1) for k, v in obj.items()}
    return obj


