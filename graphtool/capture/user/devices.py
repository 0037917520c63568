"""``--device``: parse it into a ``torch.device`` and build the user's model under it."""

from __future__ import annotations

import contextlib


def parse_device(device: str, *, choices: str = "meta, cpu or cuda",
                 no_cuda_hint: str = "use --device meta to build without memory, or run on a GPU machine"):
    """``--device`` as a ``torch.device``; a CUDA device gets its index. Errors name the option:
    not a device (hint: ``choices``), no CUDA present (hint: ``no_cuda_hint``), an index past the count."""
    import torch

    from graphtool.errors import NoCudaDevice, UsageError

    try:
        dev = torch.device(device)
    except (RuntimeError, ValueError):
        raise UsageError(f"--device {device!r} is not a torch device", hint=f"try {choices}") from None
    if dev.type != "cuda":
        return dev
    if not torch.cuda.is_available():
        raise NoCudaDevice(f"--device {device}: no CUDA device is present", hint=no_cuda_hint)
    index = torch.cuda.current_device() if dev.index is None else dev.index
    if index >= torch.cuda.device_count():
        count = torch.cuda.device_count()
        raise UsageError(f"--device {device}: this machine has {count} CUDA device{'s' if count != 1 else ''}",
                         hint="count from cuda:0")
    return torch.device("cuda", index)


@contextlib.contextmanager
def device_context(device: str | None):
    if device is None:
        yield
        return
    with parse_device(device):
        yield


