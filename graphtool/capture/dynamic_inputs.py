"""Inputs of another size, for ``--dynamic``: what a model serving several sizes would see.

Which size varies is taken, in order, from what the script declares and then from the inputs themselves:

1. ``dynamic_inputs`` (and ``dynamic_kwargs``): inputs of another size, used as given;
2. ``dynamic_dims``: which dimension varies, ``{"input_ids": 1}`` (an argument's name or position) or
   one int for the first tensor; that dimension grows by one;
3. otherwise the structure: integer token ids (``input_ids`` of shape batch x sequence) grow along
   the sequence, the dimension that varies in real use; anything else grows its batch.

Every input that shares the chosen tensor's sizes up to that dimension grows with it (an
``attention_mask`` beside ``input_ids``). When the model does not accept the varied inputs,
:func:`run_variant` says which sizes changed and how to declare the right ones.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from graphtool.capture.tensors import map_tensors
from graphtool.errors import BadModelSpec, GraphtoolError
from graphtool.text import shape_text


@dataclass(frozen=True)
class Variant:
    args: tuple
    kwargs: dict
    how: str  # what changed, for messages: "input_ids 1x12 -> 1x13, dim 1: the sequence of integer token ids"
    name: str | None = None  # the input whose dimension was chosen (None: the script's dynamic_inputs)
    dim: int | None = None


def dynamic_variant(spec, to_device: str | None = None) -> tuple[tuple, dict]:
    """Inputs of another size for ``--dynamic`` (see the module docstring for which size)."""
    v = choose_variant(spec, to_device)
    return v.args, v.kwargs


def choose_variant(spec, to_device: str | None = None) -> Variant:
    import torch

    module = sys.modules.get(getattr(spec, "module_name", "") or "")
    if module is not None and hasattr(module, "dynamic_inputs"):
        args = module.dynamic_inputs
        args = (args,) if isinstance(args, torch.Tensor) else tuple(args)
        kwargs = dict(getattr(module, "dynamic_kwargs", None) or spec.kwargs)
        if to_device:
            args, kwargs = map_tensors((args, kwargs), lambda t: t.detach().to(to_device).requires_grad_(t.requires_grad))
        return Variant(args, kwargs, "the script's dynamic_inputs")
    from graphtool.capture.user.input_names import tensor_inputs

    named = tensor_inputs(spec)
    if not named:
        return Variant(spec.args, spec.kwargs, "no tensor input to vary")
    declared = getattr(module, "dynamic_dims", None) if module is not None else None
    if declared is not None:
        name, ref, dim = _declared(spec, named, declared)
        why = "the script's dynamic_dims"
    else:
        name, ref = named[0]
        token_ids = ref.dim() >= 2 and not ref.is_floating_point() and not ref.is_complex() and ref.dtype != torch.bool
        dim = 1 if token_ids else 0 if ref.dim() > 0 else None
        why = "the sequence of integer token ids" if token_ids else "the batch"
    if dim is None:
        return Variant(spec.args, spec.kwargs, f"{name} is a scalar: nothing to vary")
    prefix = tuple(ref.shape[: dim + 1])

    def grow(t):
        if t.dim() > dim and tuple(t.shape[: dim + 1]) == prefix:
            return torch.cat([t.detach(), t.detach().narrow(dim, 0, 1)], dim=dim).requires_grad_(t.requires_grad)
        return t

    grown = [n for n, t in named if t.dim() > dim and tuple(t.shape[: dim + 1]) == prefix and n != name]
    new_shape = list(ref.shape)
    new_shape[dim] += 1
    how = f"{name} {shape_text(ref.shape)} -> {shape_text(new_shape)}, dim {dim}: {why}"
    if grown:
        how += f"; {', '.join(grown)} grown with it"
    return Variant(map_tensors(spec.args, grow), map_tensors(spec.kwargs, grow), how, name, dim)


def run_variant(spec, call: Callable[..., Any], to_device: str | None = None,
                on_inputs: Callable[[tuple, dict], None] | None = None):
    """``call(*args, **kwargs)`` on the varied inputs (``on_inputs(args, kwargs)`` first: the tracer names
    them). When the model itself does not accept them (eager raises too), the error names what changed
    and how to declare the sizes that vary."""
    v = choose_variant(spec, to_device)
    if on_inputs is not None:
        on_inputs(v.args, v.kwargs)
    try:
        return call(*v.args, **v.kwargs)
    except GraphtoolError:
        raise
    except Exception:
        fit = _eager_error(spec, v)
        if fit is None:
            raise  # the model takes these sizes eagerly: a compile problem, explained by the caller
        raise _does_not_fit(spec, v, fit) from None


def _eager_error(spec, v: Variant) -> BaseException | None:
    import torch

    try:
        with torch.no_grad():
            spec.model(*v.args, **v.kwargs)
    except Exception as exc:
        return exc
    return None


def _does_not_fit(spec, v: Variant, exc: BaseException) -> GraphtoolError:
    from graphtool.capture.user.boundary import user_code_error

    err = user_code_error(exc, f"--dynamic: the model does not accept inputs of another size ({v.how})", spec.location)
    if v.name is None:
        return err.with_hint("make dynamic_inputs in the script inputs the model accepts (built like example_inputs)")
    other = 0 if v.dim else 1
    return err.with_hint(
        f"say in the script which size varies in real use: dynamic_dims = {{{v.name!r}: {other}}} (another dimension), "
        "or dynamic_inputs = (...) with inputs of another size that the model accepts"
    )


def _declared(spec, named, declared) -> tuple[str, Any, int]:
    """The (name, tensor, dim) ``dynamic_dims`` names: ``{"input_ids": 1}``, ``{0: 1}`` or an int."""
    if isinstance(declared, bool) or not isinstance(declared, (int, dict)) or isinstance(declared, dict) and len(declared) != 1:
        raise BadModelSpec(f"{spec.location}: dynamic_dims must be one {{input: dimension}} pair or an int, got {declared!r}",
                           hint="dynamic_dims = {'input_ids': 1} varies input_ids' second dimension")
    from graphtool.capture.user.input_names import find_input

    key, dim = next(iter(declared.items())) if isinstance(declared, dict) else (0, declared)
    names = [n for n, _ in named]
    key, found = find_input(spec, named, key)
    if found is None:
        raise BadModelSpec(f"{spec.location}: dynamic_dims names {key!r}, which is not a tensor input",
                           hint=f"the tensor inputs are: {', '.join(names)}")
    name, t = found
    if isinstance(dim, bool) or not isinstance(dim, int) or not 0 <= dim < t.dim():
        raise BadModelSpec(f"{spec.location}: dynamic_dims: {name} has {t.dim()} dimensions, so {dim!r} is not one of them",
                           hint=f"a dimension from 0 to {t.dim() - 1}")
    return name, t, dim
