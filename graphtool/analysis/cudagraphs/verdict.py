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
``graphtool.capture.standin.meta``). Config flags are read from the installed torch at run time.

Example::

    >>> from graphtool.capture.standin.meta import to_meta
    >>> from graphtool.capture.user.script import load_model
    >>> from graphtool.capture.tracer import trace_model
    >>> capture = trace_model(to_meta(load_model("examples/cpu_roundtrip.py")), backend="cudagraphs", standin=True)
    >>> v = cudagraph_verdict(capture, backend="cudagraphs")
    >>> v.eligible, [r.code for r in v.reasons]
    (False, ['cpu-node', 'forward-skipped'])
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from graphtool.analysis.cudagraphs.catalogue import ENTRIES, INCOMPATIBLE, PREFIX, SPLITS, by_slug, clean_message
from graphtool.analysis.graph_summary import Source, user_source
from graphtool.capture import compat

BACKENDS = ("inductor", "cudagraphs")

#: each finding code's fix (from the catalogue, where every reason is written down once)
FIXES = {e.slug: by_slug(e.slug).fix for e in ENTRIES.values()}



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
    message: str  # torch's message said once, without its stack trace (``clean_message``)
    region: int | None
    graph: str | None  # forward | backward | inference | None (a break between regions)
    skips: bool
    source: Source | None
    fix: str
    cg: str = ""  # the catalogue code (CG002); see graphtool.analysis.cudagraphs.catalogue
    torch_message: str = ""  # torch's message verbatim, doubled prefix and stack trace included; "" where torch logs nothing
    kind: str = ""  # skip | split | risk | note
    silent: str = ""  # set when torch says nothing for it: what torch does instead

    def to_dict(self) -> dict:
        return {
            "code": self.code,
            "cg": self.cg,
            "kind": self.kind,
            "message": self.message,
            "torch_message": self.torch_message,
            "silent": self.silent,
            "region": self.region,
            "graph": self.graph,
            "skips": self.skips,
            "source": self.source.to_dict() if self.source else None,
            "fix": self.fix,
        }


@dataclass(frozen=True)
class Partition:
    """One piece of a graph as inductor's graph partitioning would cut it (the whole graph when it does not)."""

    region: int
    graph: str
    index: int
    ops: int
    cudagraphed: bool
    reason: str | None = None  # why it is not CUDA-graphed (torch's should_partition wording, or a skip)
    op: str | None = None  # its first op
    source: Source | None = None
    split: bool = False  # True: a partition boundary; False with a reason: the whole graph is skipped

    def to_dict(self) -> dict:
        return {"region": self.region, "graph": self.graph, "index": self.index, "ops": self.ops, "cudagraphed": self.cudagraphed,
                "reason": self.reason, "split": self.split, "op": self.op, "source": self.source.to_dict() if self.source else None}


def _pct(part: int, whole: int) -> int:
    return round(100 * part / whole) if whole else 0


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
    partitions: tuple[Partition, ...] = ()
    steady: object = None  # graphtool.analysis.steady_state.SteadyState: the loop's steps, when they were run

    def summary(self) -> str:
        skips = [r for r in self.reasons if r.skips]
        if self.no_graph:
            return f"torch.compile captured no graph, so nothing would be CUDA-graphed: {self.no_graph}"
        compiled = self.regions if self.regions_compiled is None else self.regions_compiled
        if self.regions < compiled or self.unjudged:
            verdict = "skipped" if skips else "unknown"
            if self.regions < compiled:
                return (f"CUDA graphs with backend {self.backend}: {verdict}; only {self.regions} of {compiled} "
                        f"regions could be judged ({self.unjudged})")
            from graphtool.text import count

            return (f"CUDA graphs with backend {self.backend}: {verdict}; {count(self.regions, 'region')} judged before "
                    f"the stand-in trace stopped, later ones unknown ({self.unjudged})")
        if not skips:
            splits = sum(r.code == "partition-split" for r in self.reasons)
            extra = f", split into more graphs at {splits} place{'s' if splits != 1 else ''}" if splits else ""
            from graphtool.text import count

            every = "the one region" if self.regions == 1 else f"all {count(self.regions, 'region')}"
            return f"CUDA graphs would be applied to {every} with backend {self.backend}{extra}"
        where = sorted({(r.region, r.graph) for r in skips}, key=lambda k: (k[0] if k[0] is not None else -1, k[1] or ""))
        parts = ", ".join(f"region {reg} {g}" for reg, g in where)
        return f"CUDA graphs would be skipped with backend {self.backend}: {parts}"

    def coverage(self) -> dict:
        """Share of ops inside CUDA graphs, for the whole model and per region."""
        total = sum(p.ops for p in self.partitions)
        inside = sum(p.ops for p in self.partitions if p.cudagraphed)
        regions = {}
        for p in self.partitions:
            t, i = regions.get(p.region, (0, 0))
            regions[p.region] = (t + p.ops, i + (p.ops if p.cudagraphed else 0))
        return {
            "partitions": len(self.partitions),
            "partitions_cudagraphed": sum(p.cudagraphed for p in self.partitions),
            "ops": total,
            "ops_cudagraphed": inside,
            "percent": _pct(inside, total),
            "regions": [{"region": r, "ops": t, "ops_cudagraphed": i, "percent": _pct(i, t)} for r, (t, i) in sorted(regions.items())],
        }

    def coverage_line(self) -> str:
        """One line: ``reduce-overhead would CUDA-graph 3 of 4 partitions, 91% of ops; split at model.py:42 (cpu op)``."""
        from graphtool.display_paths import display_path

        who = "reduce-overhead" if self.backend == "inductor" else 'backend="cudagraphs"'
        if not self.partitions:
            return f"{who} would CUDA-graph nothing: no graph was judged"
        c = self.coverage()
        unit = "partitions" if self.backend == "inductor" and self.config.get("graph_partition") else "graphs"
        line = f"{who} would CUDA-graph {c['partitions_cudagraphed']} of {c['partitions']} {unit}, {c['percent']}% of ops"
        stops = []
        for p in self.partitions:
            if p.cudagraphed:
                continue
            at = f"{display_path(p.source.file)}:{p.source.line}" if p.source else f"region {p.region} {p.graph}"
            verb = "split at" if p.split else "skipped at"
            entry = f"{verb} {at} ({p.reason})"
            if entry not in stops:
                stops.append(entry)
        if stops:
            more = f" and {len(stops) - 3} more" if len(stops) > 3 else ""
            line += "; " + "; ".join(stops[:3]) + more
        return line

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
            "partitions": [p.to_dict() for p in self.partitions],
            "coverage": self.coverage(),
            "coverage_line": self.coverage_line(),
            "summary": self.summary(),
            **({"steady_state": self.steady.to_dict()} if self.steady is not None else {}),
        }


def _reason(code: str, message: str, region, graph, skips: bool, source=None, *, cg: str | None = None,
            torch_message: str | None = None, silent: bool | None = None) -> Reason:
    """A finding; ``message`` is torch's wording (or graphtool's where torch says nothing), kept verbatim in
    ``torch_message`` unless ``torch_message`` gives what torch really logs (its doubled prefix)."""
    entry = ENTRIES[cg] if cg else by_slug(code)
    verbatim = message if torch_message is None else torch_message
    quiet = ((not entry.template and entry.kind != "note") or entry.kind == "split") if silent is None else silent
    return Reason(code, clean_message(message), region, graph, skips, source, entry.fix,
                  cg=entry.code, torch_message=verbatim if entry.template else "", kind=entry.kind,
                  silent=(entry.silent or "torch itself logs nothing for this") if quiet else "")


def _accelerator_mapping(gm):
    """torch's device->node mapping with the meta stand-in renamed to cuda:0."""
    import torch

    mapping = compat.device_node_mapping(gm)
    meta = torch.device("meta")
    if meta in mapping:
        node = mapping.pop(meta)
        mapping.setdefault(torch.device("cuda", 0), node)
    return mapping


def _src(node) -> Source | None:
    return user_source(node.meta.get("stack_trace")) if node is not None else None


def _without_stack(msg: str) -> str:
    """torch's message without its 'Found from' stack trace."""
    return msg.split(". Found from")[0].strip()


def _found_from(node, sep: str = " Found from : \n ") -> str:
    stack = node.meta.get("stack_trace") if node is not None else None
    return f"{sep}{stack}" if stack else ""


# ---- settings: read from the installed torch, overridable with --set --------------------------

#: name -> (which config, its path there, type)
SETTINGS: dict[str, tuple[str, str, type]] = {
    "graph_partition": ("inductor", "graph_partition", bool),
    "cudagraph_trees": ("inductor", "triton.cudagraph_trees", bool),
    "cudagraph_support_input_mutation": ("inductor", "triton.cudagraph_support_input_mutation", bool),
    "cudagraph_skip_dynamic_graphs": ("inductor", "triton.cudagraph_skip_dynamic_graphs", bool),
    "cudagraph_min_partition_size": ("inductor", "triton.cudagraph_min_partition_size", int),
    "cudagraph_capture_sizes": ("inductor", "triton.cudagraph_capture_sizes", tuple),
    "cpp_wrapper": ("inductor", "cpp_wrapper", bool),
    "cudagraph_backend_support_input_mutation": ("dynamo", "cudagraph_backend_support_input_mutation", bool),
}
_TRUE, _FALSE = {"true", "1", "yes", "on"}, {"false", "0", "no", "off"}


def parse_settings(items) -> dict:
    """``["graph_partition=false"]`` -> ``{"graph_partition": False}``; a mistake is a UsageError (exit 2).

    >>> parse_settings(["graph_partition=off", "cudagraph_min_partition_size=3", "cudagraph_capture_sizes=17,64"])
    {'graph_partition': False, 'cudagraph_min_partition_size': 3, 'cudagraph_capture_sizes': (17, 64)}
    """
    from graphtool.errors import UsageError

    out: dict = {}
    for item in items or ():
        key, sep, raw = item.partition("=")
        key, raw = key.strip(), raw.strip().lower()
        if not sep or key not in SETTINGS:
            raise UsageError(f"--set {item!r}: {'expected KEY=VALUE' if not sep else f'unknown setting {key!r}'}",
                             hint=f"settings: {', '.join(SETTINGS)}")
        kind = SETTINGS[key][2]
        if kind is bool:
            if raw not in _TRUE | _FALSE:
                raise UsageError(f"--set {item!r}: {key} takes true or false", hint="true/false, on/off, 1/0, yes/no")
            out[key] = raw in _TRUE
        elif kind is tuple:
            parts = [p.strip() for p in raw.split(",")]
            if raw in ("none", "") or not all(p.isdigit() for p in parts):
                raise UsageError(f"--set {item!r}: {key} takes sizes separated by commas",
                                 hint=f"--set {key}=17,64: only these sizes are CUDA-graphed")
            out[key] = tuple(int(p) for p in parts)
        else:
            if not raw.isdigit():
                raise UsageError(f"--set {item!r}: {key} takes a whole number >= 0")
            out[key] = int(raw)
    return out


def _settings_patches(overrides: dict, backend: str):
    import contextlib

    inductor = {"triton.cudagraphs": True} if backend == "inductor" else {}
    dynamo = {}
    for key, value in overrides.items():
        where, path, _ = SETTINGS[key]
        if where == "inductor" and compat.has_inductor_flag(path):
            inductor[path] = value
        elif where == "dynamo":
            dynamo[path] = value
    stack = contextlib.ExitStack()
    stack.enter_context(compat.inductor_config_patch(inductor))
    stack.enter_context(compat.dynamo_config_patch(dynamo))
    return stack


def _read_settings() -> dict:
    found = {}
    for key, (where, path, kind) in SETTINGS.items():
        if where == "inductor":
            if compat.has_inductor_flag(path):
                value = compat.inductor_flag(path)
                found[key] = value if value is None else kind(value)
        else:
            found[key] = kind(compat.dynamo_flag(path))
    return found


# ---- the checks, in torch's order ---------------------------------------------------------------

def _incompatible_code(node) -> str:
    """Which catalogue entry an incompatible node is (the checks of ``is_cudagraph_unsafe_fx_node``)."""
    import torch

    target = str(node.target)
    if "_local_scalar_dense" in target:
        return INCOMPATIBLE["local_scalar_dense"]
    if "_assert_scalar" in target:
        return INCOMPATIBLE["assert_scalar"]
    if "rng_state" in target:
        return INCOMPATIBLE["rng"]
    if compat.bool_index_put_node(node):
        return INCOMPATIBLE["bool_index_put"]
    vals = node.meta.get("val")
    vals = vals if isinstance(vals, (list, tuple)) else [vals]
    if any(isinstance(v, torch.Tensor) and v.is_sparse for v in vals):
        return INCOMPATIBLE["sparse"]
    if compat.is_cudagraph_unsafe_node(node):
        return INCOMPATIBLE["unsafe_tag"]
    return INCOMPATIBLE["unbacked"]


def _incompatible(gm, region, graph, *, backend: str) -> list[Reason]:
    node = compat.first_incompatible_cudagraph_node(gm)
    if node is None:
        return []
    cg = _incompatible_code(node)
    if backend == "cudagraphs":
        msg = compat.cudagraph_skip_message(f"incompatible op ({node.name})")
        return [_reason("incompatible-op", msg, region, graph, True, _src(node), cg=cg, torch_message=PREFIX + msg)]
    if cg == INCOMPATIBLE["bool_index_put"]:  # lowering's own message comes first
        msg = f"index_put_ fallback with boolean indexing is not compatible with CUDA graphs{_found_from(node)}"
    elif cg == INCOMPATIBLE["sparse"]:
        msg = f"sparsity not handled. Please file issue for sparse inference weights.{_found_from(node)}"
    else:
        msg = f"disabling cudagraphs due to incompatible op {node.target}{_found_from(node, ' Found from ')}"
    return [_reason("incompatible-op", PREFIX + msg, region, graph, True, _src(node), cg=cg, torch_message=PREFIX + msg)]


def _device_reason(gm, region: int, graph: str, *, doubled: bool = True) -> Reason | None:
    import torch

    mapping = _accelerator_mapping(gm)
    msg = compat.check_devices(mapping)
    if msg is None:
        return None
    cpu = mapping.get(torch.device("cpu"))
    code = "cpu-node" if msg.startswith(compat.cudagraph_skip_message("cpu device")) else "multiple-devices"
    node = cpu if code == "cpu-node" else None
    return _reason(code, msg, region, graph, True, _src(node), torch_message=(PREFIX + msg) if doubled else msg)


def _cpu_only(gm) -> bool:
    """No node on the accelerator: inductor compiles it for the CPU and only bumps a counter."""
    mapping = _accelerator_mapping(gm)
    return bool(mapping) and all(d.type == "cpu" for d in mapping)


def _control_flow(gm, region, graph, partition: bool) -> list[Reason]:
    for node in gm.graph.nodes:
        name = compat.higher_order_op_name(node.target) if node.op == "call_function" else None
        if name in ("higher_order.cond", "higher_order.while_loop"):
            if name.endswith("while_loop") and partition:
                continue
            op = "torch.cond" if name.endswith("cond") else "torch.while_loop"
            msg = f"control flow operator: {op}.{_found_from(node)}"
            return [_reason("control-flow", PREFIX + msg, region, graph, True, _src(node))]
    return []


def _symbolic(val) -> bool:
    shape = getattr(val, "shape", ())
    return any(not str(s).lstrip("-").isdigit() for s in shape)


def _dynamic_skip(gm, region, graph) -> list[Reason]:
    if not any(_symbolic(n.meta.get("val")) for n in gm.graph.find_nodes(op="placeholder")):
        return []
    node = next((n for n in gm.graph.nodes if n.op != "placeholder" and _symbolic(n.meta.get("val")) and n.meta.get("stack_trace")), None)
    msg = "graph with symbolic shapes inputs and config.triton.cudagraph_skip_dynamic_graphs=True." + (
        f" Found from {node.meta['stack_trace']}\n" if node is not None else "\n")
    return [_reason("dynamic-graph", PREFIX + msg, region, graph, True, _src(node))]


def _dynamic(gm, region, graph) -> list[Reason]:
    if any(_symbolic(n.meta.get("val")) for n in gm.graph.find_nodes(op="placeholder")):
        return [_reason("dynamic-shape", "dynamic shapes: one CUDA graph is recorded per distinct size", region, graph, False)]
    return []


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




# ---- graph partitions: where inductor would cut the graph, and what is left for CUDA graphs -------

def _ops(gm) -> list:
    """The nodes inductor would schedule as work: calls that produce tensors, less the CPU scalars made of
    constants alone (:func:`_cpu_scalar_constants`)."""
    import torch

    folded = _cpu_scalar_constants(gm)
    out = []
    for node in gm.graph.nodes:
        val = node.meta.get("val")
        vals = val if isinstance(val, (list, tuple)) else [val]
        if node in folded:
            continue
        if node.op == "call_function" and (any(isinstance(v, torch.Tensor) for v in vals) or node.meta.get("unbacked_bindings")):
            out.append(node)
    return out


def _cpu_scalar_constants(gm) -> set:
    """0-d CPU tensors computed from constants alone (``torch.tensor(2.0)`` in forward: ``lift_fresh_copy`` of a
    tensor constant): inductor folds such a value (joint-graph constant folding makes it a ``full``), its
    pointwise IR is inlined into the GPU kernel that reads it (a constant; a 0-d CPU buffer would be a scalar
    argument, ``Scheduler.update_zero_dim_cpu_tensor``), so no CPU scheduler node is left to partition on.
    A CPU value that depends on a graph input (``y.cpu()``) stays a CPU op and splits the graph."""
    import torch

    constant: set = set()
    for node in gm.graph.nodes:
        if node.op == "get_attr":
            constant.add(node)
        elif node.op == "call_function" and all(a in constant for a in node.all_input_nodes):
            constant.add(node)
    folded = set()
    for node in constant:
        val = node.meta.get("val")
        if node.op == "call_function" and isinstance(val, torch.Tensor) and val.device.type == "cpu" and val.dim() == 0:
            folded.add(node)
    return folded


def _device_of(val):
    import torch

    vals = val if isinstance(val, (list, tuple)) else [val]
    return next((v.device for v in vals if isinstance(v, torch.Tensor)), None)


def split_reason(node, settings: dict) -> str | None:
    """Why inductor's graph partitioning would put ``node`` outside a CUDA graph, in the words of
    ``Scheduler.should_partition`` (torch 2.13), read on the fx node rather than the scheduler node."""

    device = _device_of(node.meta.get("val"))
    if device is not None and device.type == "cpu":
        return "cpu ops"
    if str(node.target).startswith(("aten._to_copy", "aten.copy", "prims.device_put")) and node.args:
        src = _device_of(getattr(node.args[0], "meta", {}).get("val"))
        if src is not None and device is not None and src.type != device.type:
            return "DeviceCopy ops"
    if compat.higher_order_op_name(node.target) in ("higher_order.cond", "higher_order.while_loop"):
        return "Conditional ops"
    if node.meta.get("unbacked_bindings"):
        return "unbacked binding ops"
    if compat.is_cudagraph_unsafe_node(node):
        return "CUDAGraph-unsafe custom ops"
    if settings.get("cudagraph_skip_dynamic_graphs") and _symbolic(node.meta.get("val")):
        return "dynamic shape ops"
    return None


def _op_name(node) -> str:
    name = str(node.target)
    return name[len("aten."):] if name.startswith("aten.") else name


def _op_dependencies(gm, ops: list) -> dict:
    """Each op's predecessors among ``ops``: its inputs (through the non-op nodes between, such as a size read),
    and, for an op that writes a graph input in place (``copy_``), every other op that reads that input, as
    the scheduler orders a mutation after the reads it would clobber."""
    opset = set(ops)
    memo: dict = {}

    def producers(node) -> set:
        if node in memo:
            return memo[node]
        memo[node] = set()
        found: set = set()
        for a in node.all_input_nodes:
            found |= {a} if a in opset else producers(a)
        memo[node] = found
        return found

    preds = {node: producers(node) for node in ops}
    for node in ops:
        if str(node.target).startswith("aten.copy_") and node.args and getattr(node.args[0], "op", None) == "placeholder":
            target = node.args[0]
            preds[node] |= {user for user in ops if user is not node and target in user.all_input_nodes}
    return preds


def _tensor_bytes(val) -> int:
    import torch

    total = 0
    for v in val if isinstance(val, (list, tuple)) else [val]:
        # a symbolic size counts 0: never int() it, which would specialize the symbol in the graph's shape env
        if isinstance(v, torch.Tensor) and all(type(d) is int for d in v.shape):
            total += math.prod(v.shape) * v.element_size()
    return total


def _peak_bytes(order: list, preds: dict, kept: set) -> int:
    """The most bytes the ops' outputs hold at once, run in ``order``: an output lives from its op until its
    last reader ran (graph outputs stay), the estimate ``estimate_peak_memory`` makes on scheduler nodes."""
    readers: dict = {node: 0 for node in order}
    for node in order:
        for p in preds[node]:
            readers[p] += 1
    live = peak = 0
    for node in order:
        live += _tensor_bytes(node.meta.get("val"))
        peak = max(peak, live)
        for p in preds[node]:
            readers[p] -= 1
            if readers[p] == 0 and p not in kept:
                live -= _tensor_bytes(p.meta.get("val"))
    return peak


def _partition_order(gm, ops: list, whys: dict) -> list:
    """The order inductor's scheduler puts the ops in before it partitions them (torch >= 2.9, with
    ``triton.reorder_for_reducing_graph_partitions`` on): ``reorder_for_minimizing_partition`` (a topological
    order that runs every ready op outside a CUDA graph first, then every ready op inside one, each by its
    original position), kept only where its estimated peak stays under ``cudagraph_partition_memory_budget``
    times the original's; then ``reorder_for_partition_with_simple_dependency`` (an op outside a CUDA graph that
    depends on no other op moves to the front, one read only by the graph's output to the back). An op with a
    side effect next to independent work (an effect token's ``_print``) then splits off one partition, not two."""
    flag = "triton.reorder_for_reducing_graph_partitions"
    if not ops or not compat.has_inductor_flag(flag) or not compat.inductor_flag(flag):
        return ops
    import heapq

    preds = _op_dependencies(gm, ops)
    index = {node: i for i, node in enumerate(ops)}
    succs: dict = {node: [] for node in ops}
    for node in ops:
        for p in preds[node]:
            succs[p].append(node)
    indegree = {node: len(preds[node]) for node in ops}
    outside: list = []
    inside: list = []

    def ready(node) -> None:
        heapq.heappush(outside if whys[node] is not None else inside, (index[node], id(node), node))

    for node in ops:
        if indegree[node] == 0:
            ready(node)
    order: list = []
    while outside or inside:
        for heap in (outside, inside):
            while heap:
                node = heapq.heappop(heap)[2]
                order.append(node)
                for s in succs[node]:
                    indegree[s] -= 1
                    if indegree[s] == 0:
                        ready(s)
    if len(order) != len(ops):  # a cycle through the mutation edges: keep the graph's own order
        order = ops
    output = next((n for n in gm.graph.nodes if n.op == "output"), None)
    kept = set(output.all_input_nodes) if output is not None else set()
    budget = (float(compat.inductor_flag("triton.cudagraph_partition_memory_budget"))
              if compat.has_inductor_flag("triton.cudagraph_partition_memory_budget") else 1.1)
    if order is not ops and not _peak_bytes(order, preds, kept) < _peak_bytes(ops, preds, kept) * budget:
        order = ops
    front, middle, back = [], [], []
    for node in order:
        outside_graph = whys[node] is not None
        if outside_graph and not preds[node]:
            front.append(node)
        elif outside_graph and node.users and all(u.op == "output" for u in node.users):
            back.append(node)
        else:
            middle.append(node)
    return front + middle + back


def _partitions(gm, region, graph, settings: dict, skip: Reason | None) -> tuple[list[Partition], list[Reason]]:
    """Consecutive ops with the same verdict form a partition, as ``Scheduler.graph_partition`` groups
    them; with partitioning off (or a skip) the whole graph is one."""
    ops = _ops(gm)
    if skip is not None or not settings.get("graph_partition"):
        why = skip.message.removeprefix(PREFIX) if skip is not None else None
        first = ops[0] if ops else None
        src = skip.source if skip is not None else None
        return [Partition(region, graph, 0, len(ops), skip is None, why, _op_name(first) if first is not None else None, src)], []
    whys = {node: split_reason(node, settings) for node in ops}
    runs: list[tuple[str | None, list]] = []
    for node in _partition_order(gm, ops, whys):
        why = whys[node]
        if runs and (runs[-1][0] is None) == (why is None):
            runs[-1][1].append(node)
        else:
            runs.append((why, [node]))
    min_size = int(settings.get("cudagraph_min_partition_size") or 0)
    parts, reasons = [], []
    for i, (why, nodes) in enumerate(runs):
        if why is None and len(nodes) < min_size:
            why = "small partition"
        lead = next((n for n in nodes if _src(n) is not None), nodes[0])
        parts.append(Partition(region, graph, i, len(nodes), why is None, why, _op_name(lead), _src(lead), split=why is not None))
        if why is not None:
            cg = SPLITS.get(why, "CG020")
            text = f"{why} ({len(nodes)} op{'s' if len(nodes) != 1 else ''} below minimum size {min_size})" if why == "small partition" else why
            reasons.append(_reason("partition-split", f"graph partition split: {text} at {_op_name(lead)}", region, graph, False,
                                   _src(lead), cg=cg, torch_message=why if why != "small partition" else ""))
    return parts, reasons


# ---- the two backends ------------------------------------------------------------------------------

def _graphs(region):
    if region.forward is not None:
        yield ("inference" if region.inference else "forward"), region.forward
    if region.backward is not None:
        yield "backward", region.backward


def _cudagraphs_backend(region, settings) -> tuple[list[Reason], list[Partition]]:
    reasons: list[Reason] = []
    parts: list[Partition] = []
    forward_skipped = False
    for graph, gm in _graphs(region):
        if graph == "backward" and forward_skipped:
            skip = _reason("forward-skipped", "backward not captured: the forward of this region skipped cudagraphs", region.index, graph, True)
            reasons.append(skip)
            parts += _partitions(gm, region.index, graph, {}, skip)[0]
            continue
        fixed = (compat.num_fw_fixed_arguments(len(region.inputs), region.num_aot_inputs) if graph != "backward"
                 else compat.count_tangents(gm))
        found: list[Reason] = []
        if not settings.get("cudagraph_backend_support_input_mutation"):
            idxs = compat.graph_input_mutations(gm.graph) - set(range(fixed))
            if idxs:
                msg = compat.mutation_skip_message(gm, idxs)
                found.append(_reason("mutated-input", msg, region.index, graph, True, user_source(msg), torch_message=PREFIX + msg))
        dev = _device_reason(gm, region.index, graph)
        if dev:
            found.append(dev)
        found += _incompatible(gm, region.index, graph, backend="cudagraphs")
        skip = next((r for r in found if r.skips), None)
        parts += _partitions(gm, region.index, graph, {}, skip)[0]
        found += _dynamic(gm, region.index, graph)
        forward_skipped = forward_skipped or skip is not None
        reasons += found
    return reasons, parts


def _inductor_backend(region, settings) -> tuple[list[Reason], list[Partition]]:
    """The reduce-overhead checks of one region, per graph, in the order torch runs them: a graph with
    no op at all is returned uncompiled (compile_fx_inner: no partition, nothing CUDA-graphed), then the
    override annotation (compile_fx_aot), lowering (control flow; boolean index_put and sparse
    outputs without partitioning), compile_fx (dynamic graphs, incompatible ops without partitioning,
    the allocator, devices), CompiledFxGraph (input storage mutation, mutated inputs, non-Tensor
    inputs), then cudagraph trees at run time (mutated non-static inputs)."""
    reasons: list[Reason] = []
    parts: list[Partition] = []
    partition = bool(settings.get("graph_partition"))
    for graph, gm in _graphs(region):
        if compat.inductor_leaves_uncompiled(gm):  # compile_fx_inner returns it before any CUDA-graph check
            reasons.append(_reason("uncompiled-graph", "inductor returns a graph with no ops uncompiled: nothing to CUDA-graph",
                                   region.index, graph, False, silent=True))
            continue
        found: list[Reason] = []
        ann = region.cudagraph_annotation
        if ann and (ann[0] is False or (graph == "backward" and ann[1] is False)):
            which = "disabling cudagraphs for backward" if ann[0] is not False else "disabling cudagraphs"
            found.append(_reason("override-annotation", f"{which} due to override_cudagraphs annotation", region.index, graph, True))
        found += _control_flow(gm, region.index, graph, partition)
        if not partition:
            if settings.get("cudagraph_skip_dynamic_graphs"):
                found += _dynamic_skip(gm, region.index, graph)
            found += _incompatible(gm, region.index, graph, backend="inductor")
        allocator = compat.caching_allocator_reason()
        if allocator:
            found.append(_reason("caching-allocator", allocator, region.index, graph, True, torch_message=PREFIX + allocator))
        if _cpu_only(gm):
            found.append(_reason("cpu-only-graph", "no CUDA node: inductor compiles this graph for the CPU", region.index, graph, True))
        else:
            dev = _device_reason(gm, region.index, graph)
            if dev:
                found.append(dev)
        storage = compat.input_storage_mutation_reason(gm)
        if storage:
            found.append(_reason("input-storage-mutation", PREFIX + storage, region.index, graph, True, user_source(storage)))
        if graph != "backward":
            found += _inductor_mutations(gm, region, settings)
            found += _input_checks(region, graph, partition)
        skip = next((r for r in found if r.skips), None)
        more_parts, splits = _partitions(gm, region.index, graph, settings, skip)
        parts += more_parts
        reasons += found + splits + _dynamic(gm, region.index, graph)
    return reasons, parts


def _input_checks(region, graph, partition: bool) -> list[Reason]:
    """CompiledFxGraph's cudagraph_tests on the example inputs: with partitioning, a failure disables
    CUDA graphs without a word (cudagraph_partition_post_compile)."""
    found = []
    overlap = compat.complex_memory_overlap_reason(region.example_inputs)  # torch 2.11/2.12 only
    if overlap:
        found.append(_reason("complex-memory-overlap", overlap, region.index, graph, True, torch_message="" if partition else overlap,
                             silent=partition))
    accepted = ("FakeTensor", "Tensor", "Parameter", "SymInt", "Generator", "FunctionalTensor", "CustomClass")
    if any(t not in accepted for t in region.aot_input_types):
        msg = compat.cudagraph_skip_message(str(["non-Tensor inputs"]))
        found.append(_reason("non-tensor-input", msg, region.index, graph, True, torch_message="" if partition else msg, silent=partition))
    if "Generator" in region.aot_input_types:
        found.append(_reason("rng-generator", "a torch.Generator is a graph input: register it with the CUDA graph", region.index, graph, False))
    return found


def _inductor_mutations(gm, region, settings) -> list[Reason]:
    idxs = compat.graph_input_mutations(gm.graph)
    if not idxs:
        return []
    graph = "inference" if region.inference else "forward"
    trees = settings.get("cudagraph_trees", True)
    if settings.get("cudagraph_support_input_mutation") and trees:
        # checked by cudagraph trees at run time: static inputs (parameters, buffers, mark_static_address) may be mutated
        idxs = idxs - _static_indices(gm, region, at_run_time=True)
        if not idxs:
            return []
        msg = compat.mutation_skip_message(gm, idxs)
        return [_reason("mutated-input", _without_stack(msg) + " (checked at run time)", region.index, graph, True, user_source(msg),
                        torch_message=msg)]
    msg = compat.inductor_mutation_check(gm, idxs, _static_indices(gm, region) if trees else ())
    if msg is None:
        return []
    return [_reason("mutated-input", msg, region.index, graph, True, user_source(msg), torch_message=PREFIX + msg)]


def _break_reasons(breaks) -> list[Reason]:
    """Each graph break (a :class:`~graphtool.analysis.trace_report.BreakInfo`) as a note between regions, its fix the
    one every command gives for that cause (``BreakInfo.help``)."""
    from dataclasses import replace

    from graphtool.analysis.diagnostics import HOST_SYNC

    out = []
    for b in breaks:
        src = Source(b.file, b.line) if b.file and b.line else None
        code = "host-sync" if HOST_SYNC.search(b.reason) else "graph-break"
        out.append(replace(_reason(code, f"graph break: {b.reason}", None, None, False, src), fix=b.help))
    return out


def check_cudagraph_backend(backend: str) -> None:
    """A backend whose CUDA graphs the verdict models (:data:`BACKENDS`); refuse another before any tracing
    is spent on it."""
    if backend not in BACKENDS:
        from graphtool.errors import UsageError

        raise UsageError(f"--backend {backend!r} is not one of {', '.join(BACKENDS)}")


def cudagraph_verdict(capture, *, backend: str = "inductor", predicted: bool = True, settings: dict | None = None) -> Verdict:
    """Run torch's CUDA-graph checks on every region of ``capture`` (a stand-in trace), with the installed
    torch's config overridden by ``settings`` (:func:`parse_settings`)."""
    from graphtool.analysis.trace_report import dedupe_breaks

    check_cudagraph_backend(backend)
    reasons: list[Reason] = []
    parts: list[Partition] = []
    settings = dict(settings or {})
    with _settings_patches(settings, backend):
        config = _read_settings()
    import torch

    if config.get("cpp_wrapper") and config.get("graph_partition") and not ENTRIES["CG017"].on(compat.parse_torch_version(torch.__version__)):
        settings["graph_partition"] = False  # torch 2.11 turns partitioning off under cpp_wrapper, silently
    with _settings_patches(settings, backend):
        config = _read_settings()
        if backend == "inductor" and config.get("cpp_wrapper") and config.get("graph_partition"):
            reasons.append(_reason("cpp-wrapper", PREFIX + "cpp-wrapper does not support graph partition yet", None, None, True))
        for region in capture.regions:
            found, more = _inductor_backend(region, config) if backend == "inductor" else _cudagraphs_backend(region, config)
            reasons += found
            parts += more
    reasons += _break_reasons(dedupe_breaks(capture.breaks))
    compiled = capture.regions_compiled if capture.regions_compiled is not None else len(capture.regions)
    # a stand-in that stopped judged only the regions before the stop, whatever the own-device run counted
    unjudged = capture.stopped if (len(capture.regions) < compiled or capture.stopped) else None
    # eligible only when every region torch compiles was judged and none skips
    eligible = bool(capture.regions) and len(capture.regions) >= compiled and not unjudged and not any(r.skips for r in reasons)
    return Verdict(backend, eligible, predicted, len(capture.regions), tuple(reasons), config,
                   regions_compiled=compiled, unjudged=unjudged, no_graph=getattr(capture, "no_graph", None),
                   partitions=tuple(parts))
