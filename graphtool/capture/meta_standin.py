"""An accelerator stand-in: the model and its inputs moved to the meta device.

This machine (and CI) has no GPU, and faking CUDA on a CPU build of torch can abort the
interpreter. The meta device does the job safely: a trace on meta keeps every op the user's code
puts on the CPU (``.cpu()`` becomes ``_to_copy`` to cpu, ``torch.tensor(2.0)`` a cpu constant),
which a CPU trace cannot show since ``.cpu()`` is a no-op there. Meta then stands for ``cuda:0``.
"""

from __future__ import annotations

from dataclasses import replace

from graphtool.capture.script import ModelSpec


def accelerator_of(spec: ModelSpec) -> str:
    """``cuda`` when the model already lives on a GPU, else ``meta`` (the stand-in)."""
    from graphtool.capture.tensors import iter_tensors

    tensors = list(spec.model.parameters()) if hasattr(spec.model, "parameters") else []
    tensors += list(iter_tensors((spec.args, spec.kwargs)))
    return "cuda" if any(t.device.type == "cuda" for t in tensors) else "meta"


def to_meta(spec: ModelSpec) -> ModelSpec:
    """Move the model (in place) and the example inputs to meta, keeping input aliasing."""
    import torch

    from graphtool.capture.tensors import map_tensors

    memo: dict[int, torch.Tensor] = {}

    def move(t):
        if id(t) in memo:
            return memo[id(t)]
        if t.device.type == "meta":
            moved = t
        elif t._base is not None:  # a view of another tensor: view the moved base the same way
            base = move(t._base).detach()
            moved = base.as_strided(t.size(), t.stride(), t.storage_offset())
        else:
            moved = t.detach().to("meta")
        if t.requires_grad and moved.is_leaf and not moved.requires_grad:
            moved.requires_grad_(True)
        memo[id(t)] = moved
        return moved

    if isinstance(spec.model, torch.nn.Module):
        spec.model.to("meta")
    return replace(spec, args=map_tensors(spec.args, move), kwargs=map_tensors(spec.kwargs, move))


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
