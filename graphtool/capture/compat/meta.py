"""What the meta-device stand-in needs of torch to run a model as a GPU would, with no data: the ops whose
Python ``Meta`` kernel would shadow their autograd decomposition taken out while it traces (so ``nll_loss``
records a backward on meta), real meta constants accepted by fake tensor mode (pytorch/pytorch#139092),
``nonzero`` allowed on meta, fused optimizers allowed on meta, and the ``FakeTensorMode`` its eager runs go through."""

from __future__ import annotations

import contextlib
import functools
import importlib

from graphtool.capture.compat._lookup import _import, _require


def _meta_kernels_over_composites() -> list:
    """The aten ops that decompose for autograd (a ``CompositeImplicitAutograd`` kernel: ``nll_loss``,
    ``dropout``...) and also have a Python ``Meta`` kernel (torch's refs registered as meta kernels)."""
    import torch

    _import("torch._meta_registrations")  # registers them
    packet_type = _require("torch._ops", "OpOverloadPacket")
    meta, composite = torch._C.DispatchKey.Meta, torch._C.DispatchKey.CompositeImplicitAutograd
    has_kernel = _require("torch._C", "_dispatch_has_kernel_for_dispatch_key")
    found = []
    for name in dir(torch.ops.aten):
        packet = getattr(torch.ops.aten, name, None)
        if not isinstance(packet, packet_type):
            continue
        for overload in packet.overloads():
            op = getattr(packet, overload)
            if meta in getattr(op, "py_kernels", {}) and has_kernel(op.name(), composite):
                found.append(op)
    return found


@contextlib.contextmanager
def composites_keep_autograd_on_meta():
    """While the stand-in traces: the ops of :func:`_meta_kernels_over_composites` decompose on meta as on a GPU.

    Under AOT autograd's tracing (the Python dispatcher) a meta tensor's op with a Python ``Meta`` kernel runs
    that kernel at the autograd key instead of its autograd decomposition, so it records no backward:
    ``cross_entropy``'s ``nll_loss`` on meta gave no gradient to any parameter (the backward graph returned
    None for each), where a CUDA tensor's decomposes into ``nll_loss_forward``, whose backward exists. The
    kernels are taken out of ``py_kernels`` for the trace and put back after it."""
    import torch

    meta = torch._C.DispatchKey.Meta
    removed = []
    try:
        for op in _meta_kernels_over_composites():
            removed.append((op, op.py_kernels.pop(meta)))
            getattr(op, "_dispatch_cache", {}).clear()
        yield len(removed)
    finally:
        for op, kernel in removed:
            op.py_kernels[meta] = kernel
            getattr(op, "_dispatch_cache", {}).clear()


def meta_nonzero_config():
    """A context manager letting ``nonzero`` run on meta (it assumes every element is non-zero),
    so a stand-in trace gets past boolean masking; a no-op where torch lacks the flag."""
    cfg = getattr(importlib.import_module("torch.fx.experimental._config"), "meta_nonzero_assume_all_nonzero", None)
    if cfg is None:
        import contextlib

        return contextlib.nullcontext()
    return importlib.import_module("torch.fx.experimental._config").patch(meta_nonzero_assume_all_nonzero=True)


@contextlib.contextmanager
def fused_optimizers_on_meta():
    """While open, an optimizer built with ``fused=True`` takes parameters on meta: ``torch.optim.optimizer``'s
    supported-device list for fused kernels (read by ``_device_dtype_check_for_fused`` and
    ``_default_to_fused_or_foreach`` at each call) gains ``meta``, whose fused kernels exist
    (``torch._fused_adamw_`` runs on meta); the stand-in stands for a GPU, where fused is supported. A no-op where
    torch lacks the function."""
    module = importlib.import_module("torch.optim.optimizer")
    original = getattr(module, "_get_fused_kernels_supported_devices", None)
    if original is None:
        yield
        return

    def with_meta() -> list:
        return [*original(), "meta"]

    module._get_fused_kernels_supported_devices = with_meta
    try:
        yield
    finally:
        module._get_fused_kernels_supported_devices = original


def meta_constants_as_fake():
    """A context manager under which fake tensor mode takes real meta tensors as constants.

    ``torch.tensor(data, device="meta")`` skips fake tensor mode (pytorch/pytorch#139092): inside a
    trace on meta it gives a real meta tensor, and the next op fails with "Please convert all
    Tensors to FakeTensors" (transformers' ``DynamicCache`` starts each layer with
    ``torch.tensor([], device=...)``). On a GPU the same call yields a fake constant. A meta tensor
    holds no data, so faking it loses nothing; real tensors on other devices still fail. A no-op
    where torch makes the fake tensor itself, or lacks the hook.

    >>> import torch
    >>> with meta_constants_as_fake(), torch._subclasses.fake_tensor.FakeTensorMode():
    ...     (torch.tensor([], device="meta") + torch.ones(0, device="meta")).shape
    torch.Size([0])
    """
    import contextlib
    from unittest import mock

    fake = importlib.import_module("torch._subclasses.fake_tensor")
    mode, tls = getattr(fake, "FakeTensorMode", None), getattr(fake, "fake_tensor_tls", None)
    validate = getattr(mode, "validate_and_convert_non_fake_tensors", None)
    if validate is None or not hasattr(tls, "allow_non_fake_inputs_override") or meta_constructors_make_fake():
        return contextlib.nullcontext()

    def accepting_meta(self, func, converter, flat_args, args_spec):
        import torch

        loose = [a for a in flat_args if isinstance(a, torch.Tensor) and not self.is_our_fake(a)]
        if not loose or not all(a.device.type == "meta" and not isinstance(a, fake.FakeTensor) for a in loose):
            return validate(self, func, converter, flat_args, args_spec)
        before, tls.allow_non_fake_inputs_override = tls.allow_non_fake_inputs_override, True
        try:
            return validate(self, func, converter, flat_args, args_spec)
        finally:
            tls.allow_non_fake_inputs_override = before

    return mock.patch.object(mode, "validate_and_convert_non_fake_tensors", accepting_meta)


@functools.cache
def meta_constructors_make_fake() -> bool:
    """Whether this torch's ``torch.tensor(..., device="meta")`` gives a fake tensor under fake
    tensor mode (pytorch/pytorch#139092 fixed), so :func:`meta_constants_as_fake` has nothing to do."""
    import torch

    fake = importlib.import_module("torch._subclasses.fake_tensor")
    with fake.FakeTensorMode():
        return isinstance(torch.tensor(0.0, device="meta"), fake.FakeTensor)


def fake_tensor_mode():
    """A ``FakeTensorMode`` that also takes real tensors (converting them as they come): the eager run
    of a model built on meta goes through it, so code that asks whether it is being traced
    (transformers' ``is_tracing``: a fake tensor) skips its data-dependent checks, as under
    torch.compile, instead of calling ``.item()`` on meta."""
    return _require("torch._subclasses.fake_tensor", "FakeTensorMode")(allow_non_fake_inputs=True)
