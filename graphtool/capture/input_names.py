"""Name every example-input tensor the way the user's forward names it: ``x``, ``inputs[1]``, ``mask['a']``."""

from __future__ import annotations

import inspect
from typing import Any

from graphtool.capture.script import ModelSpec, is_module
from graphtool.capture.tensors import named_tensors


def positional_names(spec: ModelSpec) -> list[str]:
    """The forward's name for each positional example input (``args[i]`` past the signature)."""
    fn = spec.model.forward if is_module(spec.model) else spec.model
    try:
        params = [
            p.name for p in inspect.signature(fn).parameters.values()
            if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
        ]
    except (TypeError, ValueError):
        params = []
    return [params[i] if i < len(params) else f"args[{i}]" for i in range(len(spec.args))]


def all_named_inputs(spec: ModelSpec) -> list[tuple[str, Any]]:
    """``(name, tensor)`` for every tensor in the example inputs, a tensor passed twice twice."""
    named = []
    for label, arg in zip(positional_names(spec), spec.args):
        named.extend(named_tensors(arg, label))
    for key, value in spec.kwargs.items():
        named.extend(named_tensors(value, key))
    return named


def argument_names(spec: ModelSpec) -> dict[int, str]:
    """id(tensor) -> the forward's argument name (``x``, ``inputs[1]``), first name wins."""
    names: dict[int, str] = {}
    for name, t in all_named_inputs(spec):
        names.setdefault(id(t), name)
    return names


