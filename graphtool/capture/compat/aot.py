"""AOT autograd (``torch._functorch``) and the AOT stage of each torch.compile backend: the
ViewAndMutationMeta of the graph being compiled (input mutations, output aliasing, static inputs; copied
while it is compiled, or collected from AOT's first pass), the descriptors of AOT's placeholders and outputs,
the partitioner's tags and the checkpoint policy on a node, :func:`run_aot_stage` (each backend's own AOT
stage with compilers that keep the graphs) under :func:`capture_config`, the min-cut partitioner recorded and
rerun at another activation-memory budget, and which stage of torch.compile raised an exception."""

from __future__ import annotations

import contextlib
import functools
import importlib
import warnings
from typing import Any

from graphtool.capture.compat._lookup import _import, _require
from graphtool.capture.compat.dynamo import dynamo_flag


def boxed_fn(fn: Any):
    """Wrap a function (a GraphModule's ``forward``) so AOT autograd calls it with boxed (list)
    arguments, unchanged."""
    return _require("torch._functorch.aot_autograd", "make_boxed_func")(fn)


def current_fw_metadata():
    """The ViewAndMutationMeta of the graph being compiled (call inside a forward compiler)."""
    ctx_cls = _require("torch._guards", "TracingContext")
    ctx = ctx_cls.try_get()
    return getattr(ctx, "fw_metadata", None) if ctx is not None else None


def input_mutation_flags(meta: Any) -> list[dict]:
    """Per AOT input of a ViewAndMutationMeta: how it is mutated, as plain flags
    (``mutates_data``, ``mutates_metadata``, ``mutates_storage``, ``under_no_grad``)."""
    return [
        {
            "mutates_data": bool(info.mutates_data),
            "mutates_metadata": bool(info.mutates_metadata),
            "mutates_storage": bool(getattr(info, "mutates_storage_metadata", False)),
            "under_no_grad": bool(getattr(info, "mutations_under_no_grad_or_inference_mode", False)),
        }
        for info in meta.input_info
    ]


def output_aliasing(meta: Any) -> list[tuple[str, int | None]]:
    """Per user output of a ViewAndMutationMeta: ``(OutputType name, base index)``."""
    return [(info.output_type.name, info.base_idx) for info in meta.output_info]


def static_input_indices(meta: Any) -> set[int]:
    """AOT inputs torch treats as static (parameters, buffers, ``mark_static_address``)."""
    return set(getattr(meta, "static_input_indices", None) or ())


def node_descriptor(node: Any) -> Any:
    """AOT autograd's descriptor of a placeholder (``PlainAOTInput(idx=0)``) or None."""
    return node.meta.get("desc")


def output_descriptors(graph: Any) -> list[Any] | None:
    """AOT's per-output descriptors of a graph (``InputMutationAOTOutput``, ``GradAOTOutput``...)."""
    out = next(iter(graph.find_nodes(op="output")), None)
    if out is None:
        return None
    desc = out.meta.get("desc")
    return list(desc) if desc is not None else None


def describe_aot_input(desc: Any) -> tuple[str, int | None]:
    """Map an AOT input descriptor to ``(role, dynamo_input_index)``.

    Roles: ``plain`` (a dynamo graph input), ``view_base`` (a synthetic base AOT made for inputs
    that alias each other), ``tangent`` (the index is the output it is the tangent of), ``unknown``.
    Works on the dataclasses in ``torch._functorch._aot_autograd.descriptors`` by their names and fields.
    """
    seen = 0
    while desc is not None and seen < 8:
        seen += 1
        name = type(desc).__name__
        if "Token" in name or name.startswith("Philox"):  # effect tokens, rng seeds: no user input behind them
            return "token", None
        if name == "TangentAOTInput":
            return "tangent", getattr(getattr(desc, "output", None), "idx", None)
        if name in ("PlainAOTInput", "ParamAOTInput", "BufferAOTInput") and hasattr(desc, "idx"):
            return "plain", desc.idx
        if hasattr(desc, "base_of"):
            role, idx = describe_aot_input(desc.base_of)
            return ("view_base" if role == "plain" else role), idx
        desc = getattr(desc, "base", None)
    return "unknown", None


def aot_input_attribute(desc: Any) -> str | None:
    """The attribute of dynamo's graph an AOT input is lifted from (``ParamAOTInput(target='self___param_groups_0__params___0')``),
    else None. Dynamo installs what a compiled optimizer reads (its parameters, their state) as attributes of
    its graph, not as placeholders; AOT lifts them as inputs named by ``target``, with no dynamo input index."""
    if type(desc).__name__ in ("ParamAOTInput", "BufferAOTInput") and getattr(desc, "idx", None) is None:
        target = getattr(desc, "target", None)
        return target if isinstance(target, str) else None
    return None


def describe_aot_output(desc: Any) -> tuple[str, Any]:
    """Map an AOT output descriptor to ``(role, detail)``.

    Roles: ``mutated_input`` (detail: dynamo input index), ``user_output`` (output index),
    ``saved_for_backward``, ``intermediate_base``, ``gradient`` (input index), ``none``.
    """
    if desc is None:
        return "none", None
    name = type(desc).__name__
    if name == "InputMutationAOTOutput":
        return "mutated_input", describe_aot_input(desc.mutated_input)[1]
    if name == "PlainAOTOutput":
        return "user_output", desc.idx
    if name.startswith("SavedForBackwards"):
        return "saved_for_backward", getattr(desc, "idx", None)
    if name == "IntermediateBaseAOTOutput":
        return "intermediate_base", None
    if name == "GradAOTOutput":
        return "gradient", describe_aot_input(desc.grad_of)[1]
    return "other", name


# -- each backend's own AOT stage, with compilers that keep the graphs -------------------------


#: the torch.compile backends whose AOT graphs graphtool reproduces
AOT_BACKENDS = ("inductor", "aot_eager", "cudagraphs")


def capture_config():
    """functorch settings for a capture: AOT's autograd cache off, since a cache hit would skip the
    keeping compilers (and a miss would try to save what they return)."""
    cfg = _require("torch._functorch", "config")
    return cfg.patch({"enable_autograd_cache": False}) if hasattr(cfg, "enable_autograd_cache") else contextlib.nullcontext()


def copy_fw_metadata():
    """The ViewAndMutationMeta being compiled, copied: AOT later empties some of its fields."""
    import copy

    meta = current_fw_metadata()
    return copy.copy(meta) if meta is not None else None


def run_aot_stage(backend: str, gm: Any, example_inputs: list, *, keep: Any, standin: bool = False):
    """Compile dynamo's graph ``gm`` with ``backend``'s own AOT stage (its decompositions, partitioner,
    input-mutation handling and config), the final code generation replaced by ``keep``.

    ``keep(kind, aot_gm, aot_inputs)`` is called with kind ``forward``, ``backward`` or
    ``inference`` and the graph exactly as that backend's final compiler receives it (inductor's
    ``inner_compile``; for the others, as its ``aot_*_graph`` structured-trace artifact shows it), and
    returns the boxed callable that runs the graph. ``standin``: the graphs run on the meta device,
    where inductor's constant folding would fold whole graphs away."""
    if backend == "inductor":
        return _inductor_stage(gm, example_inputs, keep, standin)
    aot_autograd = _require("torch._dynamo.backends.common", "aot_autograd")
    compilers = {f"{k}_compiler": functools.partial(keep, k.replace("fw", "forward").replace("bw", "backward"))
                 for k in ("fw", "bw", "inference")}
    if backend == "aot_eager":
        partition = _require("torch._functorch.partitioners", "min_cut_rematerialization_partition")
        return aot_autograd(**compilers, partition_fn=partition, keep_inference_input_mutations=True)(gm, example_inputs)
    if backend == "cudagraphs":
        keep_mutations = bool(dynamo_flag("cudagraph_backend_keep_input_mutation"))
        return aot_autograd(**compilers, keep_inference_input_mutations=keep_mutations)(gm, example_inputs)
    raise ValueError(f"no AOT stage for backend {backend!r}")


def _inductor_stage(gm: Any, example_inputs: list, keep: Any, standin: bool):
    """``compile_fx`` with ``inner_compile`` (inductor's lowering) replaced by ``keep``: every graph is
    kept as inductor lowers it. An inference graph reaches inner_compile after the joint-graph passes
    that ``compile_fx_forward`` runs on it (a training graph gets them inside inductor's partitioner),
    so it is kept there too, not as the earlier ``aot_inference_graph`` artifact prints it."""
    compile_fx = _require("torch._inductor.compile_fx", "compile_fx")

    def inner_compile(aot_gm, aot_inputs, **kw):
        if kw.get("is_backward"):
            return keep("backward", aot_gm, aot_inputs)
        return keep("inference" if kw.get("is_inference") else "forward", aot_gm, aot_inputs)

    patches = {"joint_graph_constant_folding": False} if standin else None
    return compile_fx(gm, example_inputs, inner_compile=inner_compile, config_patches=patches)


def partitioner_tag(node: Any) -> str | None:
    """Which half of the joint graph an AOT node came from, as the partitioner tagged it:
    ``"is_forward"`` or ``"is_backward"`` (``node.meta["partitioner_tag"]``). A call in a backward
    graph tagged ``is_forward`` is a forward op the partitioner recomputes instead of saving."""
    tag = node.meta.get("partitioner_tag")
    return str(tag) if tag is not None else None


def checkpoint_policy(node: Any) -> str | None:
    """The activation-checkpointing policy dynamo gave a node traced inside ``torch.utils.checkpoint``
    (``node.meta["recompute"]``, a ``CheckpointPolicy``: ``PREFER_RECOMPUTE``, ``MUST_SAVE``...), or None
    for a node outside any checkpoint."""
    policy = node.meta.get("recompute")
    if policy is None:
        return None
    return str(getattr(policy, "name", policy))


# -- the activation-memory budget: torch's own partitioner, rerun on the joint graph it partitioned --------




class JointRecord:
    """What torch's min-cut partitioner was handed for one region: the joint graph (a copy taken before it
    partitioned, after inductor's joint-graph passes), its inputs and keyword arguments (``num_fwd_outputs``,
    ``static_lifetime_input_indices``, ``compiler``)."""

    def __init__(self, joint: Any, joint_inputs: Any, kwargs: dict):
        self.joint, self.joint_inputs, self.kwargs = joint, joint_inputs, kwargs


@contextlib.contextmanager
def recording_joint_partitions(records: list):
    """Within: every call of ``min_cut_rematerialization_partition`` (inductor's, through
    ``torch._inductor.compile_fx``, and the one aot_eager is handed) appends a :class:`JointRecord` to
    ``records`` and then partitions as before. Nothing about the partition changes."""

    def recording_over(original):
        @functools.wraps(original)
        def recording(joint_module, joint_inputs, *args, **kwargs):
            records.append(JointRecord(_copy_graph_module(joint_module), joint_inputs, dict(kwargs, _args=args)))
            return original(joint_module, joint_inputs, *args, **kwargs)

        return recording

    with _partitioner_wrapped(recording_over):
        yield records


@contextlib.contextmanager
def _partitioner_wrapped(wrap):
    """Within: ``min_cut_rematerialization_partition`` is ``wrap(original)`` where inductor and aot_eager look it up."""
    from unittest import mock

    # import both before patching either: compile_fx binds the partitioner's name when first imported, and a
    # first import under the patch would keep the recording wrapper for good
    modules = [importlib.import_module(name) for name in ("torch._functorch.partitioners", "torch._inductor.compile_fx")]
    with contextlib.ExitStack() as stack:
        for module in modules:
            original = getattr(module, "min_cut_rematerialization_partition", None)
            if original is not None:
                stack.enter_context(mock.patch.object(module, "min_cut_rematerialization_partition", wrap(original)))
        yield


@contextlib.contextmanager
def recording_partitions(out: list):
    """Within: every call of ``min_cut_rematerialization_partition`` appends the ``(forward, backward)`` graphs it
    returns to ``out``: the backward a region gets before any backward compiler sees it (compiled autograd traces
    that graph itself and never hands it to the backend). Nothing about the partition changes."""

    def recording_over(original):
        @functools.wraps(original)
        def recording(*args, **kwargs):
            parts = original(*args, **kwargs)
            out.append(parts)
            return parts

        return recording

    with _partitioner_wrapped(recording_over):
        yield out


def partition_at_budget(record: JointRecord, budget: float, *, region: bool = False) -> tuple[Any, Any]:
    """``(forward, backward)``: torch's own ``min_cut_rematerialization_partition`` run again on a copy of
    ``record``'s joint graph with ``torch._functorch.config.activation_memory_budget`` set to ``budget``. A graph
    with its own ``region_activation_memory_budget`` keeps it (torch's partitioner prefers it), unless ``region``:
    then its annotation is set to ``budget`` on the copy, as if the model had entered the region with that budget."""
    partitioners = importlib.import_module("torch._functorch.partitioners")
    partition = getattr(partitioners.min_cut_rematerialization_partition, "__wrapped__",
                        partitioners.min_cut_rematerialization_partition)
    cfg = _require("torch._functorch", "config")
    kwargs = dict(record.kwargs)
    args = kwargs.pop("_args", ())
    joint = _copy_graph_module(record.joint)
    if region:
        key = getattr(importlib.import_module("torch.fx.traceback"), "MEMORY_BUDGET_ANNOTATION_KEY",
                      _REGION_BUDGET_KEY)
        for gm in [joint, *(m for _, m in joint.named_modules() if m is not joint and hasattr(m, "graph"))]:
            for node in gm.graph.nodes:
                custom = node.meta.get("custom")
                if isinstance(custom, dict) and key in custom:
                    node.meta["custom"] = {**custom, key: float(budget)}
    with cfg.patch({"activation_memory_budget": float(budget)}):
        return partition(joint, record.joint_inputs, *args, **kwargs)


# -- torch.autograd.graph.region_activation_memory_budget (torch 2.13+): a budget per compiled graph ---------

#: where torch keeps a region's budget on each FX node it annotates (``torch.fx.traceback``'s
#: ``MEMORY_BUDGET_ANNOTATION_KEY``; this is its value in 2.13 to 2.15, used when the constant is not there)
_REGION_BUDGET_KEY = "_region_activation_memory_budget"


def has_region_activation_memory_budget() -> bool:
    """Whether this torch has ``torch.autograd.graph.region_activation_memory_budget`` (2.13 and newer)."""
    graph = importlib.import_module("torch.autograd.graph")
    return callable(getattr(graph, "region_activation_memory_budget", None))


def region_budget_of(gm: Any) -> float | None:
    """The ``region_activation_memory_budget`` torch's partitioner applies to the joint graph ``gm`` (one per
    graph: torch refuses a graph with two), read off its nodes as the partitioner reads it; None: none set."""
    tb = importlib.import_module("torch.fx.traceback")
    reader = getattr(tb, "_get_memory_budget_annotation", None)
    key = getattr(tb, "MEMORY_BUDGET_ANNOTATION_KEY", _REGION_BUDGET_KEY)
    for node in getattr(getattr(gm, "graph", None), "nodes", ()):
        if reader is not None:
            budget = reader(node)
        else:
            custom = node.meta.get("custom")
            budget = custom.get(key) if isinstance(custom, dict) else None
        if budget is not None:
            return float(budget)
    return None


class RegionBudgets:
    """The ``region_activation_memory_budget`` contexts an eager run entered: ``(budget, file, line)`` each."""

    def __init__(self) -> None:
        self.entered: list[tuple[float, str, int]] = []


_HOOK = "_graphtool_region_budget_hook"


def _region_budget_stand_in(budget):  # its code runs as torch's function's while graphtool's eager runs last
    return _graphtool_region_budget_hook(budget)  # noqa: F821  (looked up in torch.autograd.graph's globals)


@contextlib.contextmanager
def region_budgets_in_eager():
    """Within: ``torch.autograd.graph.region_activation_memory_budget(b)`` checks ``b`` as torch does (a number in
    0..1, TypeError/ValueError otherwise) and records where it was entered, then does nothing: graphtool's eager
    runs (what autograd saves, the eager step's peak) measure the model as eager torch would run it without the
    budget, which has no effect there (torch raises outside ``torch.compile`` instead of running the model). Never
    entered around dynamo's trace, which must run torch's own function. Yields a :class:`RegionBudgets`.

    The function object stays the same (its ``__code__`` is swapped, then restored): dynamo keys its trace rules
    by that object and may build them during this window, and a module that imported the name sees the change."""
    import sys

    graph = importlib.import_module("torch.autograd.graph")
    original = getattr(graph, "region_activation_memory_budget", None)
    found = RegionBudgets()
    if original is None or getattr(original, "__code__", None) is None or original.__code__.co_freevars:
        yield found
        return

    def hook(budget):
        if isinstance(budget, bool) or not isinstance(budget, (int, float)):
            raise TypeError("torch.autograd.graph.region_activation_memory_budget: expects a float, got "
                            f"{type(budget).__name__}")
        if not 0.0 <= budget <= 1.0:
            raise ValueError(f"torch.autograd.graph.region_activation_memory_budget: must be in [0, 1], got {budget}")
        frame = sys._getframe(2)
        found.entered.append((float(budget), frame.f_code.co_filename, frame.f_lineno))
        return contextlib.nullcontext()

    code = original.__code__
    original.__globals__[_HOOK] = hook
    original.__code__ = _region_budget_stand_in.__code__
    try:
        yield found
    finally:
        original.__code__ = code
        original.__globals__.pop(_HOOK, None)


def copy_graph_module(gm: Any) -> Any:
    """A GraphModule over a copy of ``gm``'s graph, as it is now (later passes on ``gm`` do not reach it)."""
    return _copy_graph_module(gm)


def _copy_graph_module(gm: Any) -> Any:
    """A GraphModule over a copy of ``gm``'s graph (nodes and their meta dicts copied; tensors, fake values and
    attributes shared): what the partitioner rewrites is the graph, and a deep copy of fake tensors can fail."""
    import copy

    fx = importlib.import_module("torch.fx")
    with warnings.catch_warnings():  # copying a pytree spec warns of LeafSpec's deprecation (2.13)
        warnings.simplefilter("ignore", FutureWarning)
        graph = copy.deepcopy(gm.graph)
    out = fx.GraphModule(gm, graph)
    out.meta = dict(getattr(gm, "meta", {}) or {})
    return out


@contextlib.contextmanager
def collecting_fw_metadata(found: list):
    """Appends to ``found`` every ViewAndMutationMeta AOT autograd collects while the block runs.

    AOT's first pass (``run_functionalized_fw_and_collect_metadata``) computes the forward's input
    mutations before the joint trace, the partitioner and the backend's compilers: when a later step
    fails, this is what was known by then (a TracingContext gets the metadata only after the partition)."""
    from unittest import mock

    aot = _require("torch._functorch.aot_autograd", "run_functionalized_fw_and_collect_metadata")

    def recording(*args, **kwargs):
        collect = aot(*args, **kwargs)

        def run(*flat_args):
            meta = collect(*flat_args)
            found.append(meta)
            return meta

        return run

    with mock.patch.object(_import("torch._functorch.aot_autograd"), "run_functionalized_fw_and_collect_metadata", recording):
        yield found


#: torch.compile's exceptions by the stage that raises them (each checked in tests/capture/test_compat.py)
_STAGE_EXCEPTIONS = (
    ("torch._inductor.exc", "LoweringException", "inductor lowering"),
    ("torch._dynamo.exc", "Unsupported", "dynamo"),
    ("torch._dynamo.exc", "TorchRuntimeError", "dynamo"),
    ("torch._dynamo.exc", "InternalTorchDynamoError", "dynamo"),
    ("torch._dynamo.exc", "UserError", "dynamo"),
)


def compile_stage_of(chain: list) -> str | None:
    """The stage of torch.compile that raised, by the exception classes in ``chain`` (outermost first):
    ``inductor lowering`` for inductor's ``LoweringException``, ``dynamo`` for dynamo's own errors
    (Unsupported, TorchRuntimeError...); None when the chain holds none of them (``BackendCompilerFailed``
    says only that the backend raised: its traceback decides AOT autograd or inductor)."""
    for module, name, stage in _STAGE_EXCEPTIONS:
        cls = _require(module, name)
        if any(isinstance(e, cls) for e in chain):
            return stage
    return None
