"""Would CUDA graphs be applied, region by region, forward and backward, and if not, why.

Two backends are modelled, each by running torch's own check functions on the traced graphs, in
the order torch runs them (see ``torch/_dynamo/backends/cudagraphs.py`` and
``torch/_inductor/output_code.py``):

* ``cudagraphs`` (``torch.compile(backend="cudagraphs")``): mutated inputs, any CPU node or several
  devices, then the first incompatible op each skip the whole graph; a skipped forward leaves the
  backward uncaptured too.
* ``inductor`` (``mode="reduce-overhead"``): the caching allocator, several devices (CPU nodes only
  without graph partitioning), input storage mutation, mutated inputs (static inputs, parameters,
  buffers and ``mark_static_address`` tensors, are spared; with ``cudagraph_support_input_mutation``
  the check moves to run time), non-tensor inputs. With ``graph_partition`` CPU nodes and
  incompatible ops split the graph instead of skipping it. Releases differ (``compat.OPTIONAL``): input
  storage mutation and the allocator are checked from torch 2.13 on, complex memory overlap of
  inputs only by 2.11/2.12.

Graphs come from the accelerator stand-in trace (meta stands for cuda:0; see
``graphtool.capture.meta_standin``). Config flags are read from the installed torch at run time.

Example::

    >>> from graphtool.capture.meta_standin import to_meta
    >>> from graphtool.capture.script import load_model
    >>> from graphtool.capture.tracer import trace_model
    >>> capture = trace_model(to_meta(load_model("examples/cpu_roundtrip.py")), backend="cudagraphs", standin=True)
    >>> v = cudagraph_verdict(capture, backend="cudagraphs")
    >>> v.eligible, [r.code for r in v.reasons]
    (False, ['cpu-node', 'forward-skipped'])
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from graphtool.analysis.graph_summary import Source, user_source
from graphtool.capture import compat

BACKENDS = ("inductor", "cudagraphs")

FIXES = {
    "mutated-input": "clone the input before mutating it, or mutate a buffer registered on the module",
    "input-storage-mutation": "avoid set_()/resize_() on inputs; return a new tensor instead",
    "cpu-node": "create tensors on the input's device (device=x.device) and avoid .cpu()/.item() in forward",
    "multiple-devices": "keep the whole model and its inputs on one CUDA device",
    "incompatible-op": "move the op out of the compiled region, or replace it with a device-side equivalent",
    "complex-memory-overlap": "pass inputs whose elements do not share memory (.contiguous() on an as_strided/unfold window); torch 2.13+ no longer checks",
    "non-tensor-input": "pass tensors (or ints) to the compiled function; close over other values",
    "caching-allocator": "unset PYTORCH_NO_CUDA_MEMORY_CACHING",
    "forward-skipped": "fix the forward's reason; the backward follows it",
    "partition-split": "each split is a separate CUDA graph with a host round trip between them",
    "graph-break": "each region is captured separately; remove the break to get one graph",
    "host-sync": "a host sync between graphs (.item(), data-dependent shape): keep the value on the device",
    "dynamic-shape": "one CUDA graph is recorded per distinct size; pad to a few fixed sizes",
    "rng-generator": "register custom torch.Generator objects with the CUDA graph",
}

_HOST_SYNC = re.compile(r"item\(\)|_local_scalar_dense|data[- ]dependent|dynamic shape operator|nonzero|DynamicOutputShape", re.I)


# What stops a CUDA graph of the *eager* step (graphtool bench's own capture), as opposed to what makes
# torch.compile's backends skip: work on the CPU is not replayed, a host sync is not allowed while
# capturing, an unregistered generator cannot advance in a graph, and capture needs the caching
# allocator. Mutated or non-tensor inputs and plain graph breaks stop torch's backends, not a capture
# of eager code, so bench still measures what a graph would buy and the verdict says why torch skips.
EAGER_CAPTURE_BLOCKERS = frozenset(
    {"cpu-node", "multiple-devices", "incompatible-op", "host-sync", "caching-allocator", "rng-generator"}
)


def eager_capture_blockers(verdict: dict) -> list[dict]:
    """The reasons in ``verdict`` (``Verdict.to_dict()``) that would stop capturing the eager step."""
    return [r for r in verdict["reasons"] if r["code"] in EAGER_CAPTURE_BLOCKERS]


@dataclass(frozen=True)
class Reason:
    code: str
    message: str
    region: int | None
    graph: str | None  # forward | backward | None (a break between regions)
    skips: bool
    source: Source | None
    fix: str

    def to_dict(self) -> dict:
        return {
            "code": self.code,
            "message": self.message,
            "region": self.region,
            "graph": self.graph,
            "skips": self.skips,
            "source": self.source.to_dict() if self.source else None,
            "fix": self.fix,
        }


@dataclass(frozen=True)
class Verdict:
    backend: str
    eligible: bool
    predicted: bool  # True: from a stand-in trace, not a GPU run
    regions: int  # regions judged
    reasons: tuple[Reason, ...]
    config: dict
    regions_compiled: int | None = None  # regions torch compiles (None: the same as judged)
    unjudged: str | None = None  # why some regions could not be judged
    no_graph: str | None = None  # torch.compile captured no graph: the cause

    def summary(self) -> str:
        skips = [r for r in self.reasons if r.skips]
        if self.no_graph:
            return f"torch.compile captured no graph, so nothing would be CUDA-graphed: {self.no_graph}"
        compiled = self.regions if self.regions_compiled is None else self.regions_compiled
        if self.regions < compiled:
            verdict = "skipped" if skips else "unknown"
            return (f"CUDA graphs with backend {self.backend}: {verdict}; only {self.regions} of {compiled} "
                    f"regions could be judged ({self.unjudged})")
        if not skips:
            splits = sum(r.code == "partition-split" for r in self.reasons)
            extra = f", split into more graphs at {splits} place{'s' if splits != 1 else ''}" if splits else ""
            return f"CUDA graphs would be applied to all {self.regions} region(s) with backend {self.backend}{extra}"
        where = sorted({(r.region, r.graph) for r in skips})
        parts = ", ".join(f"region {reg} {g}" for reg, g in where)
        return f"CUDA graphs would be skipped with backend {self.backend}: {parts}"

    def to_dict(self) -> dict:
        return {
            "backend": self.backend,
            "eligible": self.eligible,
            "predicted": self.predicted,
            "regions": self.regions,
            "regions_judged": self.regions,
            "regions_compiled": self.regions if self.regions_compiled is None else self.regions_compiled,
            "unjudged": self.unjudged,
            "no_graph": self.no_graph,
            "config": dict(self.config),
            "reasons": [r.to_dict() for r in self.reasons],
            "summary": self.summary(),
        }


def _reason(code: str, message: str, region, graph, skips: bool, source=None) -> Reason:
    return Reason(code, message, region, graph, skips, source, FIXES.get(code, ""))


def _accelerator_mapping(gm):
    """torch's device->node mapping with the meta stand-in renamed to cuda:0."""
    import torch

    mapping = compat.device_node_mapping(gm)
    meta = torch.device("meta")
    if meta in mapping:
        node = mapping.pop(meta)
        mapping.setdefault(torch.device("cuda", 0), node)
    return mapping


def _device_reason(gm, region: int, graph: str) -> Reason | None:
    import torch

    mapping = _accelerator_mapping(gm)
    msg = compat.check_devices(mapping)
    if msg is None:
        return None
    cpu = mapping.get(torch.device("cpu"))
    code = "cpu-node" if msg.startswith(compat.cudagraph_skip_message("cpu device")) else "multiple-devices"
    node = cpu if code == "cpu-node" else None
    return _reason(code, _without_stack(msg), region, graph, True, _src(node))


def _src(node) -> Source | None:
    return user_source(node.meta.get("stack_trace")) if node is not None else None


def _without_stack(msg: str) -> str:
    """torch's message without its 'Found from' stack trace."""
    return msg.split(". Found from")[0].strip()


def _incompatible(gm, region, graph, *, skips: bool) -> list[Reason]:
    node = compat.first_incompatible_cudagraph_node(gm)
    if node is None:
        return []
    msg = compat.cudagraph_skip_message(f"incompatible op ({node.name})")
    if not skips:
        msg = f"graph split around incompatible op {node.name} ({node.target})"
    return [_reason("incompatible-op" if skips else "partition-split", msg, region, graph, skips, _src(node))]


def _partition_splits(gm, region, graph) -> list[Reason]:
    """With graph partitioning, every CPU op (grouped by user line) splits the CUDA graph."""
    import torch

    seen: dict = {}
    for node in gm.graph.nodes:
        val = node.meta.get("val")
        if node.op == "call_function" and isinstance(val, torch.Tensor) and val.device.type == "cpu":
            src = _src(node)
            seen.setdefault(src, node)
    return [
        _reason("partition-split", f"graph split around CPU op {node.name} ({node.target})", region, graph, False, src)
        for src, node in seen.items()
    ]


def _static_indices(gm, region, *, at_run_time: bool = False) -> set[int]:
    """The forward inputs CUDA-graph trees let a graph mutate: the ones inductor is told are static.

    That is AOT's ``static_input_indices`` (``compile_fx.get_static_input_idxs``): parameters and
    buffers, which dynamo marks static when it inlines modules, tensor attributes of modules, and
    every input marked with ``torch._dynamo.mark_static_address`` (transformers' ``StaticCache``).
    Without AOT metadata inductor falls back to the inputs AOT lifted (``range(num_fixed)``). At run
    time the trees first drop static inputs whose address is not aligned
    (``remove_unaligned_input_idxs``): those are copied, so mutating them skips the graph.

    >>> from types import SimpleNamespace as NS
    >>> from graphtool.capture.aot_records import InputRecord
    >>> region = NS(fw_metadata=object(), forward_inputs=(InputRecord(0, "a", "plain", None, static=True),
    ...                                                   InputRecord(1, "b", "plain", None)))
    >>> _static_indices(None, region)
    {0}
    """
    if region.fw_metadata is None:
        static = set(range(compat.num_fw_fixed_arguments(len(region.inputs), region.num_aot_inputs)))
    else:
        static = {r.position for r in region.forward_inputs if r.static}
    return {i for i in static if _aligned(gm, i)} if at_run_time else static


def _aligned(gm, position: int) -> bool:
    """Whether the input's address would be aligned on a GPU: the caching allocator aligns every
    storage, so its storage offset decides (``data_ptr() % ALIGNMENT`` in torch's check)."""
    placeholders = list(gm.graph.find_nodes(op="placeholder"))
    val = placeholders[position].meta.get("val") if position < len(placeholders) else None
    if not hasattr(val, "storage_offset"):
        return True
    offset = val.storage_offset() * val.element_size()
    if not str(offset).lstrip("-").isdigit():  # a symbolic offset: its value is only known at run time
        return True
    return int(offset) % compat.cudagraph_input_alignment() == 0


def _dynamic(gm, region, graph) -> list[Reason]:
    for node in gm.graph.find_nodes(op="placeholder"):
        val = node.meta.get("val")
        shape = getattr(val, "shape", ())
        if any(not str(s).lstrip("-").isdigit() for s in shape):
            return [_reason("dynamic-shape", "dynamic shapes: one CUDA graph is recorded per distinct size", region, graph, False)]
    return []


def _cudagraphs_backend(region) -> list[Reason]:
    reasons: list[Reason] = []
    forward_skipped = False
    for graph, gm in (("forward", region.forward), ("backward", region.backward)):
        if gm is None:
            continue
        if graph == "backward" and forward_skipped:
            reasons.append(_reason("forward-skipped", "backward not captured: the forward of this region skipped cudagraphs", region.index, graph, True))
            continue
        fixed = (
            compat.num_fw_fixed_arguments(len(region.inputs), region.num_aot_inputs)
            if graph == "forward"
            else compat.count_tangents(gm)
        )
        found: list[Reason] = []
        if not compat.dynamo_flag("cudagraph_backend_support_input_mutation"):
            idxs = compat.graph_input_mutations(gm.graph) - set(range(fixed))
            if idxs:
                msg = compat.mutation_skip_message(gm, idxs)
                found.append(_reason("mutated-input", _without_stack(msg), region.index, graph, True, user_source(msg)))
        dev = _device_reason(gm, region.index, graph)
        if dev:
            found.append(dev)
        found += _incompatible(gm, region.index, graph, skips=True)
        found += _dynamic(gm, region.index, graph)
        forward_skipped = forward_skipped or any(r.skips for r in found)
        reasons += found
    return reasons


def _inductor_backend(region) -> list[Reason]:
    reasons: list[Reason] = []
    partition = compat.using_cudagraph_partition()
    for graph, gm in (("forward", region.forward), ("backward", region.backward)):
        if gm is None:
            continue
        allocator = compat.caching_allocator_reason()
        if allocator:
            reasons.append(_reason("caching-allocator", allocator, region.index, graph, True))
        dev = _device_reason(gm, region.index, graph)
        if dev:
            reasons.append(dev)
        if partition:
            reasons += _partition_splits(gm, region.index, graph)
            reasons += _incompatible(gm, region.index, graph, skips=False)
        else:
            reasons += _incompatible(gm, region.index, graph, skips=True)
        storage = compat.input_storage_mutation_reason(gm)
        if storage:
            reasons.append(
                _reason("input-storage-mutation", compat.cudagraph_skip_message(_without_stack(storage)), region.index, graph, True, user_source(storage))
            )
        if graph == "forward":
            reasons += _inductor_mutations(gm, region)
            overlap = compat.complex_memory_overlap_reason(region.example_inputs)  # torch 2.11/2.12 only
            if overlap:
                reasons.append(_reason("complex-memory-overlap", overlap, region.index, graph, True))
            accepted = ("FakeTensor", "Tensor", "Parameter", "SymInt", "Generator", "FunctionalTensor", "CustomClass")
            bad = [t for t in region.aot_input_types if t not in accepted]
            if bad:
                reasons.append(_reason("non-tensor-input", compat.cudagraph_skip_message("non-Tensor inputs"), region.index, graph, True))
            if "Generator" in region.aot_input_types:
                reasons.append(_reason("rng-generator", "a torch.Generator is a graph input: register it with the CUDA graph", region.index, graph, False))
        reasons += _dynamic(gm, region.index, graph)
    return reasons


def _inductor_mutations(gm, region) -> list[Reason]:
    idxs = compat.graph_input_mutations(gm.graph)
    if not idxs:
        return []
    trees = compat.inductor_flag("triton.cudagraph_trees")
    if compat.inductor_flag("triton.cudagraph_support_input_mutation") and trees:
        # static inputs (parameters, buffers, mark_static_address) may be mutated; fresh user tensors may not
        idxs = idxs - _static_indices(gm, region, at_run_time=True)
        if not idxs:
            return []
        msg = compat.mutation_skip_message(gm, idxs)
        return [_reason("mutated-input", _without_stack(msg) + " (checked at run time)", region.index, "forward", True, user_source(msg))]
    if trees:  # checked at compile time, static inputs spared the same way
        idxs = idxs - _static_indices(gm, region)
        if not idxs:
            return []
    msg = compat.mutation_skip_message(gm, idxs)
    return [_reason("mutated-input", _without_stack(msg), region.index, "forward", True, user_source(msg))]


def _break_reasons(breaks) -> list[Reason]:
    out = []
    for b in breaks:
        src = Source(b.file, b.line) if b.file and b.line else None
        code = "host-sync" if _HOST_SYNC.search(b.reason) else "graph-break"
        out.append(_reason(code, f"graph break: {b.reason}", None, None, False, src))
    return out


def check_backend(backend: str) -> None:
    """Refuse an unknown backend before any tracing is spent on it."""
    if backend not in BACKENDS:
        from graphtool.errors import UsageError

        raise UsageError(f"--backend {backend!r} is not one of {', '.join(BACKENDS)}")


def cudagraph_verdict(capture, *, backend: str = "inductor", predicted: bool = True) -> Verdict:
    """Run torch's CUDA-graph checks on every region of ``capture`` (a stand-in trace)."""
    from graphtool.analysis.trace_report import dedupe_breaks

    check_backend(backend)
    reasons: list[Reason] = []
    patch = {"triton.cudagraphs": True} if backend == "inductor" else {}
    with compat.inductor_config_patch(patch):
        config = {
            "graph_partition": bool(compat.inductor_flag("graph_partition")),
            "cudagraph_support_input_mutation": bool(compat.inductor_flag("triton.cudagraph_support_input_mutation")),
            "cudagraph_backend_support_input_mutation": bool(compat.dynamo_flag("cudagraph_backend_support_input_mutation")),
        }
        for region in capture.regions:
            reasons += _inductor_backend(region) if backend == "inductor" else _cudagraphs_backend(region)
    reasons += _break_reasons(dedupe_breaks(capture.breaks))
    compiled = capture.regions_compiled if capture.regions_compiled is not None else len(capture.regions)
    unjudged = capture.stopped if len(capture.regions) < compiled else None
    # eligible only when every region torch compiles was judged and none skips
    eligible = bool(capture.regions) and len(capture.regions) >= compiled and not any(r.skips for r in reasons)
    return Verdict(backend, eligible, predicted, len(capture.regions), tuple(reasons), config,
                   regions_compiled=compiled, unjudged=unjudged, no_graph=getattr(capture, "no_graph", None))
