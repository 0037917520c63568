"""How every other compat module reaches a torch-private symbol: by feature detection, never by version.
:func:`_require` fetches ``module.attr`` or raises :class:`~graphtool.errors.UnsupportedTorch` naming the
torch version and the symbol (:func:`_missing`); :func:`_optional` fetches one that only some supported
releases have, each listed in :data:`OPTIONAL` with what graphtool does without it. Imports go through
:func:`_import`, which keeps ``torch.utils.mkldnn``'s ``torch.jit`` deprecation warnings out of the user's run."""

from __future__ import annotations

import contextlib
import importlib
import sys
import warnings
from typing import Any

from graphtool.errors import UnsupportedTorch


@contextlib.contextmanager
def _no_jit_deprecation():
    """Without the deprecation warnings of torch's own ``torch.utils.mkldnn``: inductor imports it, and its
    ScriptModule classes raise "`torch.jit.script_method` is deprecated" 14 times, which land in the
    warnings summary of a user's pytest run that never used torch.jit. A DeprecationWarning up to 2.14, a
    FutureWarning from 2.15, where the classes are made on first attribute access: the message decides."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="`torch.jit.script_method` is deprecated")
        yield


def _import(module: str) -> Any:
    """``importlib.import_module`` under :func:`_no_jit_deprecation`; a module already imported is taken from
    ``sys.modules`` without either. Lookups run per dispatched op (``higher_order_name``) and per graph node: about
    15,000 a trace of a small decoder's shape schedule, 2.8 s of its 85 s under the warnings context each time."""
    mod = sys.modules.get(module)
    if mod is not None:
        return mod
    with _no_jit_deprecation():
        return importlib.import_module(module)


def _attr(mod: Any, attr: str) -> Any:
    found = getattr(mod, "__dict__", {})
    if attr in found:  # already made: no module __getattr__ runs, so no warning can be raised
        return found[attr]
    with _no_jit_deprecation():  # 2.15 builds some of torch.utils.mkldnn's classes on first access
        return getattr(mod, attr, None)


def _require(module: str, attr: str) -> Any:
    """Fetch ``module.attr`` or raise UnsupportedTorch naming the torch version and the symbol."""
    try:
        mod = _import(module)
    except ImportError as exc:
        raise _missing(f"{module}") from exc
    obj = _attr(mod, attr)
    if obj is None:
        raise _missing(f"{module}.{attr}")
    return obj


def _optional(module: str, attr: str) -> Any:
    """Fetch ``module.attr`` where only some supported releases have it, else None.

    Each such symbol is listed in :data:`OPTIONAL` with what graphtool does without it, and
    ``tests/capture/test_compat.py`` checks both sides on every torch it runs on."""
    try:
        mod = _import(module)
    except ImportError:
        return None
    return _attr(mod, attr)


#: private symbols that some supported torch releases lack -> what graphtool does where missing.
OPTIONAL: dict[tuple[str, str], str] = {
    ("torch._inductor.cudagraph_utils", "get_input_storage_mutation_info"):
        "2.13+: inductor skips a graph that set_()s an input; 2.11/2.12 have no such check: nothing reported",
    ("torch._inductor.cudagraph_utils", "get_input_storage_mutation_reason"):
        "2.13+: its wording; 2.11/2.12: nothing reported (see get_input_storage_mutation_info)",
    ("torch._inductor.cudagraph_utils", "check_caching_allocator_for_cudagraphs"):
        "2.13+: an uncached allocator skips cudagraphs; 2.11/2.12 do not check: nothing reported",
    ("torch._inductor.output_code", "complex_memory_overlap"):
        "2.11/2.12 only: an input whose elements overlap in memory skips cudagraphs; 2.13+ dropped it",
    ("torch._inductor.output_code", "CustomClassBase"):
        "2.14+: the custom-class objects inductor accepts as graph inputs (OpaqueBase renamed)",
    ("torch._inductor.output_code", "OpaqueBase"):
        "2.12/2.13: the same, under its old name; 2.11 accepts no such input (non-Tensor inputs skip)",
    ("torch._dynamo.symbolic_convert", "_import_module"):
        "a cache of imported modules dynamo's global aliases go through; absent: nothing to clear",
    ("torch.fx.experimental._config", "meta_nonzero_assume_all_nonzero"):
        "lets the stand-in trace run nonzero on meta; without it boolean masking stops the trace there",
    ("torch._C", "_cuda_endAllocateToPool"):
        "bench: after a failed CUDA-graph capture, stops the caching allocator routing to the graph's pool "
        "(torch's capture_end raises before it does); without it that cleanup step is skipped",
    ("torch._C", "_cuda_releasePool"):
        "bench: frees the failed capture's private memory pool; without it the pool stays until exit",
    ("torch._inductor.cudagraph_trees", "reset_cudagraph_trees"):
        "bench: forgets cudagraph trees' recorded graphs between modes (dynamo's reset does it too on 2.13+)",
    ("torch.compiler", "nested_compile_region"):
        "compile --regional: offered as the one-graph alternative to per-block compiles; absent: not offered",
    ("torch.distributed.fsdp", "FSDPModule"):
        "compile --regional: an FSDP2-wrapped block is a hazard; absent (no torch.distributed): none can be",
}


def _missing(symbol: str) -> UnsupportedTorch:
    import torch

    return UnsupportedTorch(
        f"torch {torch.__version__} has no {symbol}, which graphtool needs",
        hint="use a torch version graphtool supports (see `graphtool --version`)",
    )
