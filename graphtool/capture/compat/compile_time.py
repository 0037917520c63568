"""What ``graphtool compile`` reads of torch's own compile bookkeeping: the backend callable ``torch.compile``
builds from a backend name and a mode (so a recorder can sit in front of it), the compile id being compiled,
torch's own totals per timer (``calculate_time_spent``) and compilation metrics, a marker written into the
``TORCH_TRACE`` log between the stages of one process, dynamo's recompile limits, and
``torch.compiler.nested_compile_region`` where the installed torch has it (2.13 and 2.15 do)."""

from __future__ import annotations

import contextlib
from typing import Any

from graphtool.capture.compat._lookup import _optional, _require


def user_backend(backend: str, mode: str | None, dynamic: bool | None = None) -> Any:
    """The callable ``torch.compile(model, backend=backend, mode=mode)`` hands dynamo: inductor's wrapper (which
    applies the mode's config to its compile) or torch's wrapper of a registered backend. A recorder that calls it
    compiles exactly what ``torch.compile`` would (``torch/__init__.py``: ``_TorchCompileInductorWrapper``,
    ``_TorchCompileWrapper``)."""

    if backend == "inductor":
        return _require("torch", "_TorchCompileInductorWrapper")(mode, None, dynamic)
    return _require("torch", "_TorchCompileWrapper")(backend, mode, None, dynamic)


def current_compile_id() -> str | None:
    """The compile id dynamo is compiling now (``"0/1"``, torch's own spelling), None outside a compile."""
    cid = _require("torch._guards", "CompileContext").current_compile_id()
    return None if cid is None else str(cid)


def compile_time_totals() -> dict[str, float]:
    """torch's own seconds per timer in this process (``torch._dynamo.utils.calculate_time_spent``): its
    ``total_wall_time`` is every frame's and every lazy backward's whole compile."""
    return {str(k): float(v) for k, v in _require("torch._dynamo.utils", "calculate_time_spent")().items()}


def compilation_metrics() -> list:
    """The ``CompilationMetrics`` torch kept in this process (the last 64 by default), oldest first."""
    return list(_require("torch._dynamo.utils", "get_compilation_metrics")())


def trace_marker(name: str, text: str) -> None:
    """Write an artifact record ``name`` with the payload ``text`` into this process's TORCH_TRACE log (nothing
    without one): graphtool compile's marker between the stages of one process."""
    _require("torch._logging._internal", "trace_structured_artifact")(name, "string", payload_fn=lambda: text)


@contextlib.contextmanager
def recompile_limit_at_least(n: int):
    """dynamo's ``recompile_limit`` (and the accumulated one) raised to ``n`` while inside: a probe that compiles
    every variant of a block must not fall back to eager after the eighth."""
    cfg = _require("torch._dynamo", "config")
    changes = {}
    for name in ("recompile_limit", "accumulated_recompile_limit"):
        if hasattr(cfg, name) and getattr(cfg, name) < n:
            changes[name] = n
    with cfg.patch(changes) if changes else contextlib.nullcontext():
        yield


def nested_compile_region() -> Any:
    """``torch.compiler.nested_compile_region`` (public, 2.9 and newer), or None on a torch without it."""
    return _optional("torch.compiler", "nested_compile_region")


def is_fsdp2_module(module: Any) -> bool:
    """Whether ``fully_shard`` wrapped this module (its class became ``FSDP<Name>``, an ``FSDPModule``)."""
    cls = _optional("torch.distributed.fsdp", "FSDPModule")
    return cls is not None and isinstance(module, cls)
