"""Inputs of another size, for ``--dynamic``: what a model serving several sizes would see."""

from __future__ import annotations

import sys

from graphtool.capture.tensors import iter_tensors, map_tensors


def dynamic_variant(spec, to_device: str | None = None) -> tuple[tuple, dict]:
    """Inputs of another size for ``--dynamic``: the script's ``dynamic_inputs`` (and
    ``dynamic_kwargs``) if it defines them, else every tensor sharing the first tensor's batch size
    grown by one row (its first row repeated)."""
    import torch

    module = sys.modules.get(getattr(spec, "module_name", "") or "")
    if module is not None and hasattr(module, "dynamic_inputs"):
        args = module.dynamic_inputs
        args = (args,) if isinstance(args, torch.Tensor) else tuple(args)
        kwargs = dict(getattr(module, "dynamic_kwargs", None) or spec.kwargs)
        if to_device:
            args, kwargs = map_tensors((args, kwargs), lambda t: t.detach().to(to_device).requires_grad_(t.requires_grad))
        return args, kwargs
    first = next(iter(iter_tensors((spec.args, spec.kwargs))), None)
    batch = first.shape[0] if first is not None and first.dim() > 0 else None

    def grow(t):
        if batch is not None and t.dim() > 0 and t.shape[0] == batch:
            return torch.cat([t.detach(), t.detach()[:1]]).requires_grad_(t.requires_grad)
        return t

    return map_tensors(spec.args, grow), map_tensors(spec.kwargs, grow)
