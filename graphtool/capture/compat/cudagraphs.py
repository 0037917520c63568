"""CUDA graphs as inductor and the ``cudagraphs`` backend judge them (``torch._inductor.cudagraph_utils``,
``torch._inductor.utils``, ``torch._dynamo.backends.cudagraphs``): torch's own skip checks and their wording
(devices, incompatible ops, input mutations, storage mutation, the caching allocator, complex memory overlap,
non-Tensor inputs), the graphs inductor leaves uncompiled, the alignment of static inputs, dynamo's
``override_cudagraphs`` annotation, the per-node and per-graph checks of the catalogue (issue 15), and, for
``bench``, the cleanup after a failed capture (:func:`end_capture_pool`) and cudagraph trees' reset."""

from __future__ import annotations

import os
from typing import Any

from graphtool.capture.compat._lookup import _optional, _require


def cudagraph_skip_message(reason: str) -> str:
    """torch's own wording: ``skipping cudagraphs due to <reason>``."""
    return _require("torch._inductor.cudagraph_utils", "format_default_skip_message")(reason)


def device_node_mapping(gm: Any) -> dict:
    """device -> first node on it, as the cudagraphs backend computes it."""
    return dict(_require("torch._dynamo.backends.cudagraphs", "get_device_node_mapping")(gm))


def check_devices(mapping: dict) -> str | None:
    """torch's ``check_multiple_devices_or_any_cpu_nodes`` (reads inductor's partition config)."""
    return _require("torch._inductor.cudagraph_utils", "check_multiple_devices_or_any_cpu_nodes")(
        dict(mapping)
    )


def first_incompatible_cudagraph_node(gm: Any):
    return _require("torch._inductor.utils", "get_first_incompatible_cudagraph_node")(gm)


def graph_input_mutations(graph: Any) -> set[int]:
    """Placeholder indices that a node of ``graph`` writes to (the cudagraphs backend's scan)."""
    return set(_require("torch._dynamo.backends.cudagraphs", "find_input_mutations")(graph))


def num_fw_fixed_arguments(dynamo_inputs: int, aot_inputs: int) -> int:
    return _require("torch._inductor.utils", "num_fw_fixed_arguments")(dynamo_inputs, aot_inputs)


def count_tangents(gm: Any) -> int:
    return _require("torch._inductor.utils", "count_tangents")(gm)


def inductor_leaves_uncompiled(gm: Any) -> bool:
    """Whether inductor's ``compile_fx_inner`` hands ``gm`` back uncompiled (``make_boxed_func(gm.forward)``):
    a graph with no call node at all (``torch._dynamo.utils.count_calls(gm.graph) == 0``, a backward that
    passes the gradient through), outside AOTInductor and with functorch's ``bundled_autograd_cache`` off.
    Such a graph is never CUDA-graphed by ``mode="reduce-overhead"``; ``backend="cudagraphs"`` graphs it."""
    count_calls = _require("torch._dynamo.utils", "count_calls")
    bundled = bool(getattr(_require("torch._functorch", "config"), "bundled_autograd_cache", False))
    return count_calls(gm.graph) == 0 and not bundled


def mutation_skip_message(gm: Any, indices) -> str:
    """torch's ``skipping cudagraphs due to mutated inputs (N instances). Found from : ...``."""
    info = _require("torch._inductor.cudagraph_utils", "get_placeholder_info")(gm.graph)
    return _require("torch._inductor.cudagraph_utils", "get_mutation_stack_trace")(info, sorted(indices))


def input_storage_mutation_reason(gm: Any) -> str | None:
    """inductor's ``input storage mutation (N instances)`` check (``set_`` on a graph input)."""
    get_info = _optional("torch._inductor.cudagraph_utils", "get_input_storage_mutation_info")
    if get_info is None:  # torch 2.11 and 2.12 have no storage-mutation check: nothing to report
        return None
    return _require("torch._inductor.cudagraph_utils", "get_input_storage_mutation_reason")(get_info(gm))


def caching_allocator_reason() -> str | None:
    """The allocator check inductor runs first; on a machine without CUDA, read the env bypass.

    torch 2.11 and 2.12 have no such check (``check_caching_allocator_for_cudagraphs`` arrived in
    2.13): inductor does not skip for it there, so neither does the verdict."""
    import torch

    check = _optional("torch._inductor.cudagraph_utils", "check_caching_allocator_for_cudagraphs")
    if check is None:
        return None
    if torch.cuda.is_available():
        return check()
    if any(os.environ.get(v) == "1" for v in ("PYTORCH_NO_CUDA_MEMORY_CACHING", "PYTORCH_NO_HIP_MEMORY_CACHING")):
        return cudagraph_skip_message(
            "cudagraph capture requires the caching allocator; current allocator is uncached"
        )
    return None


def complex_memory_overlap_reason(tensors) -> str | None:
    """torch 2.11/2.12's ``complex memory overlap`` skip: an input tensor whose elements share
    memory (``as_strided``/``unfold`` windows; broadcast ``expand`` does not count), in torch's
    wording (``skipping cudagraphs due to ['complex memory overlap']``). None on 2.13+, which
    dropped the check, and when no input overlaps."""
    import torch

    overlaps = _optional("torch._inductor.output_code", "complex_memory_overlap")
    if overlaps is None:
        return None
    if any(isinstance(t, torch.Tensor) and overlaps(t) for t in tensors):
        return cudagraph_skip_message(str(["complex memory overlap"]))
    return None


def cudagraph_input_type(x: Any) -> str:
    """How the verdict names one input of an inductor graph: its type's name, or ``"CustomClass"``
    for an object inductor's ``non-Tensor inputs`` check accepts besides tensors, SymInts and
    generators: a torch custom-class (opaque) object. The base class is read from where inductor's
    check reads it: ``OpaqueBase`` in 2.12/2.13, renamed ``CustomClassBase`` in 2.14; 2.11 has
    neither, so such an object is a non-Tensor input there."""
    import torch

    base = _optional("torch._inductor.output_code", "CustomClassBase") or _optional("torch._inductor.output_code", "OpaqueBase")
    if base is not None and not isinstance(x, (torch.Tensor, torch.SymInt, torch.Generator)) and isinstance(x, base):
        return "CustomClass"
    return type(x).__name__


def end_capture_pool(device: int, pool: Any) -> None:
    """After a failed CUDA-graph capture: stop the caching allocator routing allocations to the
    capture's private pool, and release that pool. torch's ``CUDAGraph.capture_end`` raises on an
    invalidated capture before it does either (aten/src/ATen/cuda/CUDAGraph.cpp), so the allocator
    would go on treating a capture as underway."""
    for name in ("_cuda_endAllocateToPool", "_cuda_releasePool"):
        fn = _optional("torch._C", name)
        if fn is not None:
            fn(device, pool)


def reset_cudagraph_trees() -> None:
    """Forget every graph cudagraph trees recorded (``mode="reduce-overhead"``), where torch has it."""
    fn = _optional("torch._inductor.cudagraph_trees", "reset_cudagraph_trees")
    if fn is not None:
        fn()


def cudagraph_input_alignment() -> int:
    """The byte alignment CUDA-graph trees want of a static input's address (inductor's ``ALIGNMENT``);
    an unaligned one is copied instead, so it stops being static."""
    return int(_require("torch._inductor.utils", "ALIGNMENT"))


# -- CUDA-graph catalogue (issue 15): torch's own per-node and per-graph checks ------------------
# Each symbol here has a test in tests/capture/test_compat_cudagraphs.py.


def is_cudagraph_unsafe_node(node: Any) -> bool:
    """``torch._inductor.utils.is_cudagraph_unsafe_fx_node``: forbidden ops (``_local_scalar_dense``,
    ``_assert_scalar``, rng-state ops), the ``cudagraph_unsafe`` tag, boolean ``index_put``, sparse outputs."""
    return bool(_require("torch._inductor.utils", "is_cudagraph_unsafe_fx_node")(node))




def bool_index_put_node(node: Any) -> bool:
    """``torch._inductor.utils._fx_node_is_input_dependent_cudagraph_unsafe``: index_put with a boolean mask."""
    return bool(_require("torch._inductor.utils", "_fx_node_is_input_dependent_cudagraph_unsafe")(node))




def inductor_mutation_check(gm: Any, mutated_idxs, static_idxs) -> str | None:
    """inductor's compile-time mutation check (``cudagraph_utils.check_for_mutation_ignore_cuda_graph_managed_tensor``,
    the four-argument one; the cudagraphs backend has a two-argument namesake)."""
    check = _require("torch._inductor.cudagraph_utils", "check_for_mutation_ignore_cuda_graph_managed_tensor")
    ordered = _require("torch.utils._ordered_set", "OrderedSet")
    return check(gm, ordered(str(i) for i in mutated_idxs), ordered(sorted(mutated_idxs)), sorted(static_idxs))




def cudagraph_annotation(gm: Any) -> tuple[bool | None, bool | None] | None:
    """The ``torch._dynamo.override_cudagraphs`` annotation dynamo put on its graph
    (``gm.meta["cudagraph_annotation"]``, 2.12+) as ``(fwd, bwd)``; None without one."""
    ann = getattr(gm, "meta", {}).get("cudagraph_annotation")
    if ann is None:
        return None
    return getattr(ann, "fwd", None), getattr(ann, "bwd", None)
