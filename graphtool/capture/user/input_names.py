"""Name every example-input tensor the way the user's forward names it: ``x``, ``inputs[1]``, ``mask['a']``."""

from __future__ import annotations

import inspect
import re
from typing import Any

from graphtool.capture.tensors import named_tensors
from graphtool.capture.user.script import ModelSpec, is_module


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


def tensor_inputs(spec: ModelSpec) -> list[tuple[str, Any]]:
    """``(name, tensor)`` for every tensor input: :func:`all_named_inputs` without its ``None`` places."""
    return [(n, t) for n, t in all_named_inputs(spec) if t is not None]


def find_input(spec: ModelSpec, named: list[tuple[str, Any]], key) -> tuple[str, tuple[str, Any] | None]:
    """The input ``key`` names, as ``(name, (name, tensor) or None)`` from ``named``: a name, or a position (an
    int, not a bool) read as the forward's name for it (``args[i]`` past the signature or out of range)."""
    if isinstance(key, int) and not isinstance(key, bool):
        positional = positional_names(spec)
        key = positional[key] if 0 <= key < len(positional) else f"args[{key}]"
    return key, next(((n, t) for n, t in named if n == key), None)


def argument_names(spec: ModelSpec) -> dict[int, str]:
    """id(tensor) -> the forward's argument name (``x``, ``inputs[1]``), first name wins."""
    names: dict[int, str] = {}
    for name, t in all_named_inputs(spec):
        names.setdefault(id(t), name)
    return names


def source_kind_and_name(source: str) -> tuple[str, str]:
    """``(kind, name)`` for a graph input graphtool found no tensor of the model's for, from where dynamo
    took it (``compat.placeholder_source``), spelled as the user's code spells it. A local of the compiled
    frame (``L['y']``, after a graph break the resumed code's ``y``) is an ``intermediate``: a value the
    user's code computed, handed across the break; anything else (a global, ``self.cache``) ``other``.

    >>> source_kind_and_name("L['y']")
    ('intermediate', 'y')
    >>> source_kind_and_name("L['xs'][0]")
    ('intermediate', 'xs[0]')
    >>> source_kind_and_name("L['self'].cache")
    ('other', 'self.cache')
    >>> source_kind_and_name("G['table']")
    ('other', 'table')
    """
    name = re.sub(r"\b[LG]\['([^']+)'\]", r"\1", source)
    local = source.startswith("L[") and not source.startswith("L['self']")
    return ("intermediate" if local else "other"), name


def reached_state(model: Any) -> list[tuple[str, Any]]:
    """The modules and tensors a model holds: ``[("", model)]`` for an ``nn.Module``; for a plain
    function, every ``nn.Module`` and tensor it reaches through its globals and closure cells (and
    through the functions of the same script it calls), each under the name the code uses for it.

    >>> import torch
    >>> _lin = torch.nn.Linear(2, 2)
    >>> def step(x):
    ...     return _lin(x)
    >>> [(name, type(obj).__name__) for name, obj in reached_state(step)]
    [('_lin', 'Linear')]
    """
    return [(name, obj) for name, obj, _put in reached_places(model)]


def reached_places(model: Any) -> list[tuple[str, Any, Any]]:
    """:func:`reached_state` with, for each, a function that puts a new value where it was found
    (the global or the closure cell; ``None`` for the model itself)."""
    import torch

    if isinstance(model, torch.nn.Module):
        return [("", model, None)]
    owner = getattr(model, "__self__", None)  # a bound method: its module holds the state
    if isinstance(owner, torch.nn.Module):
        return [("", owner, None)]
    found: dict[int, tuple[str, Any, Any]] = {}
    seen: set[int] = set()

    def visit(fn: Any) -> None:
        fn = inspect.unwrap(fn) if callable(fn) else fn  # @torch.no_grad() wraps the function
        code = getattr(fn, "__code__", None)
        if code is None or id(fn) in seen:
            return
        seen.add(id(fn))
        values: list[tuple[str, Any, Any]] = []
        names: list[str] = []
        stack = [code]
        while stack:  # the function's own names and those of the lambdas and inner functions it defines
            c = stack.pop()
            names.extend(c.co_names)
            stack.extend(k for k in c.co_consts if inspect.iscode(k))
        g = getattr(fn, "__globals__", {})
        values += [(n, g[n], lambda new, g=g, n=n: g.__setitem__(n, new)) for n in dict.fromkeys(names) if n in g]
        for n, cell in zip(code.co_freevars, getattr(fn, "__closure__", None) or ()):
            try:
                values.append((n, cell.cell_contents, lambda new, cell=cell: setattr(cell, "cell_contents", new)))
            except ValueError:  # a cell not filled yet
                continue
        for name, value, put in values:
            if isinstance(value, (torch.nn.Module, torch.Tensor)):
                found.setdefault(id(value), (name, value, put))
            elif inspect.isfunction(value) and value.__module__ == getattr(fn, "__module__", None):
                visit(value)  # a helper of the same script

    visit(model)
    return list(found.values())


def named_state(model: Any) -> tuple[list[tuple[str, Any]], list[tuple[str, Any]]]:
    """``(parameters, buffers)`` of everything :func:`reached_state` finds, by qualified name
    (``_step.qkv.weight`` for a module-level ``_step`` a function calls), shared tensors under each name.
    A plain tensor the function reaches is a parameter when it is an ``nn.Parameter`` or a leaf that
    requires grad (``w = torch.randn(4, 4, requires_grad=True)``: trained like one, autograd gives it a
    gradient), else a buffer.

    >>> import torch
    >>> w, table = torch.ones(2, requires_grad=True), torch.ones(2)
    >>> def step(x):
    ...     return x * w + table
    >>> [[name for name, _ in group] for group in named_state(step)]
    [['w'], ['table']]
    """
    import torch

    params: list[tuple[str, Any]] = []
    buffers: list[tuple[str, Any]] = []
    for name, obj in reached_state(model):
        prefix = f"{name}." if name else ""
        if isinstance(obj, torch.nn.Module):
            params += [(prefix + fqn, p) for fqn, p in obj.named_parameters(remove_duplicate=False)]
            buffers += [(prefix + fqn, b) for fqn, b in obj.named_buffers(remove_duplicate=False)]
        elif isinstance(obj, torch.nn.Parameter) or (obj.requires_grad and obj.is_leaf):
            params.append((name, obj))
        else:
            buffers.append((name, obj))
    return params, buffers


def named_modules(model: Any) -> list[tuple[str, Any]]:
    """Every module :func:`reached_state` finds and their submodules, by qualified name (the model
    itself ``""``; a function's global ``_step`` and ``_step.qkv``)."""
    import torch

    out: list[tuple[str, Any]] = []
    for name, obj in reached_state(model):
        if isinstance(obj, torch.nn.Module):
            out += [(".".join(p for p in (name, fqn) if p), mod) for fqn, mod in obj.named_modules(remove_duplicate=False)]
    return out
