"""Will it fit: device sizes (``--fit 24GiB`` or a GPU name) and the verdict line.

Sizes are exact: ``GiB``/``MiB``/``KiB`` are powers of 1024, ``GB``/``MB``/``KB`` powers of 1000 (``24GB`` is
24,000,000,000 bytes, 22.35 GiB), a bare number is bytes. GPU names come from :data:`GPUS`: the memory the card
reports (``torch.cuda.get_device_properties().total_memory``; vendors sell an "80 GB" H100 that reports 79.2 GiB
usable, graphtool uses the card's nominal bytes as NVIDIA states them, in GiB where NVIDIA means GiB).

    >>> parse_size("24GiB"), parse_size("1.5 GB"), parse_size("512MiB")
    (25769803776, 1500000000, 536870912)
    >>> resolve_device("h100").name
    'H100'
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from graphtool.errors import UsageError

_UNITS = {"": 1, "b": 1, "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12,
          "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40}


@dataclass(frozen=True)
class Gpu:
    name: str
    bytes: int
    #: bytes cuBLAS holds through the caching allocator per handle (torch's default CUBLAS_WORKSPACE_CONFIG:
    #: 32 MiB on Hopper, 4 MiB before it); a training step uses two handles (the forward's thread, autograd's)
    cublas_workspace: int
    aliases: tuple[str, ...] = ()


GPUS = (
    Gpu("H100", 80 * 2**30, 32 * 2**20, ("h100-80gb", "h100-sxm", "h100-pcie")),
    Gpu("H200", 141 * 10**9, 32 * 2**20, ("h200-141gb",)),
    Gpu("A100-40GB", 40 * 2**30, 4 * 2**20, ("a100-40",)),
    Gpu("A100-80GB", 80 * 2**30, 4 * 2**20, ("a100", "a100-80")),
    Gpu("L4", 24 * 2**30, 4 * 2**20, ()),
    Gpu("A10G", 24 * 2**30, 4 * 2**20, ("a10",)),
    Gpu("RTX4090", 24 * 2**30, 4 * 2**20, ("4090", "rtx-4090")),
    Gpu("RTX3090", 24 * 2**30, 4 * 2**20, ("3090", "rtx-3090")),
    Gpu("T4", 16 * 2**30, 4 * 2**20, ()),
    Gpu("V100-16GB", 16 * 2**30, 4 * 2**20, ("v100",)),
    Gpu("V100-32GB", 32 * 2**30, 4 * 2**20, ()),
)

ACCEPTED = ("a size with its unit (24GiB, 80GB, 512MiB; GiB/MiB/KiB are 1024-based, GB/MB/KB 1000-based, "
            "a bare number is bytes) or a GPU name: " + ", ".join(g.name for g in GPUS))


@dataclass(frozen=True)
class Target:
    """What the step must fit: a size, or a named GPU (its size and cuBLAS workspace)."""

    text: str
    bytes: int
    gpu: Gpu | None = None

    @property
    def label(self) -> str:
        from graphtool.analysis.memory.saved import format_bytes

        return f"{self.gpu.name} ({format_bytes(self.bytes)})" if self.gpu else format_bytes(self.bytes)

    def to_dict(self) -> dict:
        return {"text": self.text, "bytes": self.bytes, "gpu": self.gpu.name if self.gpu else None}


def parse_size(text: str) -> int:
    """Bytes in ``text`` (``24GiB``, ``80 GB``, ``1e9``); UsageError (exit 2) naming what is accepted."""
    m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+(?:[eE][0-9]+)?)\s*([A-Za-z]*)\s*", text or "")
    unit = m.group(2).lower() if m else None
    if m is None or unit not in _UNITS:
        raise UsageError(f"--fit {text!r}: not a size or a GPU graphtool knows", hint=f"give {ACCEPTED}")
    value = float(m.group(1)) * _UNITS[unit]
    if not value < 2**64:  # 1e400 is infinity; no device is 16 EiB
        raise UsageError(f"--fit {text!r}: larger than any device (16 EiB or more)", hint=f"give {ACCEPTED}")
    if int(value) < 1:
        raise UsageError(f"--fit {text!r}: a device size must be at least 1 byte", hint=f"give {ACCEPTED}")
    return int(value)


def resolve_device(text: str) -> Gpu | None:
    key = (text or "").strip().lower().replace(" ", "-").replace("_", "-")
    for g in GPUS:
        if key == g.name.lower() or key in g.aliases:
            return g
    return None


def parse_target(text: str) -> Target:
    """``--fit``'s argument: a GPU name from :data:`GPUS` or a size."""
    gpu = resolve_device(text)
    if gpu is not None:
        return Target(text, gpu.bytes, gpu)
    if text and text.strip().startswith("-"):
        raise UsageError(f"--fit {text!r}: a device size must be more than 0 bytes", hint=f"give {ACCEPTED}")
    return Target(text, parse_size(text))


def parse_budgets(text: str | None) -> tuple[float, ...]:
    """``--budgets``: a comma list of activation-memory budgets in 0..1, or the default sweep.

    >>> parse_budgets(None), parse_budgets("1,0.5,0.1")
    ((1.0, 0.8, 0.6, 0.4, 0.2, 0.0), (1.0, 0.5, 0.1))
    """
    if text is None or text.strip() in ("", "default"):
        return DEFAULT_BUDGETS
    out = []
    for part in text.split(","):
        try:
            b = float(part)
        except ValueError:
            raise UsageError(f"--budgets {text!r}: {part!r} is not a number",
                             hint="give budgets between 0 and 1, comma separated (--budgets 1,0.5,0.1)") from None
        if not 0.0 <= b <= 1.0:
            raise UsageError(f"--budgets {text!r}: {part.strip()} is outside 0..1",
                             hint="torch's activation_memory_budget is a fraction: 1.0 saves what the default "
                                  "partition saves, 0.0 recomputes all it can (--budgets 1,0.5,0.1)")
        out.append(b)
    return tuple(dict.fromkeys(out))


DEFAULT_BUDGETS = (1.0, 0.8, 0.6, 0.4, 0.2, 0.0)


def verdict(peak: int, target: Target) -> str:
    from graphtool.analysis.memory.saved import format_bytes

    spare = target.bytes - peak
    if spare >= 0:
        return f"fits {target.label} with {format_bytes(spare)} spare (predicted step peak {format_bytes(peak)})"
    return f"does not fit {target.label}: over by {format_bytes(-spare)} (predicted step peak {format_bytes(peak)})"
