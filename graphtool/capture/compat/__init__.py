"""The one place graphtool reaches into torch's private modules.

Every private symbol is looked up here, by feature detection (``getattr``), never by comparing
version strings. ``tests/capture/test_compat.py`` checks each symbol so a torch release that
removes one fails loudly in CI instead of silently changing a report.

Supported: torch 2.11 and newer; tested on 2.11 to 2.15 (``graphtool.SUPPORTED_TORCH``). Below
2.11 graphtool stops (exit 2) naming the version. On a torch newer than the newest tested it runs and
warns once on stderr that its results are unverified there; GRAPHTOOL_ALLOW_UNTESTED_TORCH=1 silences
that warning (it never unlocks a torch older than 2.11). graphtool never pins torch: pip must leave
the user's torch alone.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import os
import re
import warnings
from typing import Any

from graphtool import SUPPORTED_TORCH
from graphtool.errors import UnsupportedTorch

_VERSION_RE = re.compile(r"^(\d+)\.(\d+)")

#: set to 1 to silence the untested-torch warning; graphtool sets it itself once it has warned,
#: so child processes (lint's) do not warn again.
_SILENCE_ENV = "GRAPHTOOL_ALLOW_UNTESTED_TORCH"


def parse_torch_version(version: str) -> tuple[int, int]:
    """``"2.13.0+cpu"`` -> ``(2, 13)``; compares as numbers, so (2, 10) > (2, 2)."""
    m = _VERSION_RE.match(version)
    if not m:
        raise UnsupportedTorch(f"cannot read the torch version {version!r}")
    return int(m.group(1)), int(m.group(2))


def check_torch_version(version: str) -> None:
    """Raise :class:`UnsupportedTorch` when ``version`` is older than the oldest supported torch.

    Newer releases than the newest tested pass: see :func:`untested_torch_message`."""
    lo, _ = SUPPORTED_TORCH
    if parse_torch_version(version) >= lo:
        return
    raise UnsupportedTorch(
        f"torch {version} is too old: graphtool needs torch {lo[0]}.{lo[1]} or newer",
        hint="upgrade torch (pip install -U torch), or see the README's \"Supported torch\"",
    )


#: torch's own torch.compile, as it was when graphtool first imported torch (before any user script
#: could replace it): what "torch.compile was replaced" is judged against
_ORIGINAL_COMPILE: Any = None


def original_compile() -> Any:
    return _ORIGINAL_COMPILE


def untested_torch_message(version: str) -> str | None:
    """The warning for a torch newer than the newest graphtool is tested with, else None."""
    _, hi = SUPPORTED_TORCH
    if parse_torch_version(version) <= hi:
        return None
    return (
        f"graphtool: warning: torch {version} is newer than the newest torch graphtool is tested "
        f"with ({hi[0]}.{hi[1]}); its results are unverified there "
        f"(set {_SILENCE_ENV}=1 to silence this warning)"
    )


def warn_if_untested_torch(version: str, stream: Any = None) -> bool:
    """Write :func:`untested_torch_message` to stderr, once per process tree; True when written.

    The one message graphtool's capture layer prints itself: every command reaches torch through
    :func:`import_torch`, so this is the only place that sees every run."""
    import sys

    msg = untested_torch_message(version)
    if msg is None or os.environ.get(_SILENCE_ENV) == "1":
        return False
    os.environ[_SILENCE_ENV] = "1"
    print(msg, file=stream if stream is not None else sys.stderr, flush=True)
    return True


def installed_torch_version() -> str | None:
    """torch's version from its package metadata, without importing torch (None if not found)."""
    from importlib import metadata

    try:
        return metadata.version("torch")
    except metadata.PackageNotFoundError:
        return None


def check_installed_torch() -> None:
    """The version check for a command that runs torch only in child processes (``lint``):
    too old exits 2 here, newer than tested warns once here rather than in every child."""
    version = installed_torch_version()
    if version is not None:
        check_torch_version(version)
        warn_if_untested_torch(version)


def import_torch():
    """Import torch, checking the version once; the error names what is wrong."""
    import warnings

    try:
        with warnings.catch_warnings():
            # the CPU wheel does not need numpy and graphtool never uses it; torch still warns
            warnings.filterwarnings("ignore", message="Failed to initialize NumPy")
            import torch
    except ImportError as exc:
        raise UnsupportedTorch(
            "torch is not installed",
            hint="pip install -c constraints.txt torch  (see the README)",
        ) from exc
    check_torch_version(torch.__version__)
    global _ORIGINAL_COMPILE
    if _ORIGINAL_COMPILE is None:
        _ORIGINAL_COMPILE = torch.compile
    warn_if_untested_torch(torch.__version__)
    return torch


def freeze_gc_after_import() -> None:
    """Move torch's import-time objects out of the collector's reach (``gc.freeze``).

    For graphtool's own short-lived processes only: dynamo's compile allocates heavily and each
    collection otherwise rescans torch's hundreds of thousands of module objects (0.1 s saved on
    a small model)."""
    import gc

    gc.freeze()


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
    """``importlib.import_module`` under :func:`_no_jit_deprecation`."""
    with _no_jit_deprecation():
        return importlib.import_module(module)


def _attr(mod: Any, attr: str) -> Any:
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
}


def _missing(symbol: str) -> UnsupportedTorch:
    import torch

    return UnsupportedTorch(
        f"torch {torch.__version__} has no {symbol}, which graphtool needs",
        hint="use a torch version graphtool supports (see `graphtool --version`)",
    )


# -- the meta stand-in's autograd ---------------------------------------------------------------


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


# -- pytree -------------------------------------------------------------------------------------


def pytree_children(obj: Any) -> list[Any] | None:
    """The children of ``obj`` when torch's pytree knows its type (a registered node such as
    transformers' ModelOutput or a cache class), else None (a leaf, or a type pytree never heard of)."""
    nodes = _require("torch.utils._pytree", "SUPPORTED_NODES")
    entry = nodes.get(type(obj))
    if entry is None:
        return None
    children, _context = entry.flatten_fn(obj)
    return list(children)


# -- dynamo + AOT autograd ---------------------------------------------------------------------


def dynamo_reset() -> None:
    """Forget every compiled frame so a trace starts clean.

    Dynamo reaches the globals of a function it inlines from another module through an alias it
    writes into the compiled frame's module (``__import_<module>``, into ``torch.utils._contextlib``
    for a ``@torch.no_grad()`` function) and ``reset`` leaves it there: a script loaded afresh would
    be guarded against its previous load's objects. graphtool's own script aliases are dropped, and
    the cache dynamo resolves those aliases through (``symbolic_convert._import_module``, a
    ``functools.cache`` of module name -> module) is cleared, or the alias names the old load."""
    import sys

    _require("torch._dynamo", "reset")()
    import_module = dynamo_import_module_cache()
    if import_module is not None:
        import_module.cache_clear()
    for module in list(sys.modules.values()):
        names = getattr(module, "__dict__", None)
        if not isinstance(names, dict):
            continue
        for key in [k for k in names if isinstance(k, str) and k.startswith(_USER_ALIAS)]:
            del names[key]


_USER_ALIAS = "__import_graphtool_user_"  # dynamo's alias of a script capture/script.py loaded


def dynamo_import_module_cache():
    """``torch._dynamo.symbolic_convert._import_module`` when it is a cached function, else None."""
    fn = _optional("torch._dynamo.symbolic_convert", "_import_module")
    return fn if callable(getattr(fn, "cache_clear", None)) else None


def boxed_fn(fn: Any):
    """Wrap a function (a GraphModule's ``forward``) so AOT autograd calls it with boxed (list)
    arguments, unchanged."""
    return _require("torch._functorch.aot_autograd", "make_boxed_func")(fn)


def is_fake_tensor(t) -> bool:
    """Whether ``t`` is one of dynamo's FakeTensors (its fake runs of user ops)."""
    return isinstance(t, _require("torch._subclasses.fake_tensor", "FakeTensor"))


def tracing_context_active() -> bool:
    """Whether torch.compile is tracing or compiling right now (``torch._guards.TracingContext``)."""
    ctx_cls = _require("torch._guards", "TracingContext")
    return ctx_cls.try_get() is not None


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


# -- structured trace (graph breaks) -----------------------------------------------------------

#: the logger TORCH_TRACE and tlparse read; graph-break artifacts arrive here.
STRUCTURED_TRACE_LOGGER = "torch.__trace"


# -- CUDA-graph checks -------------------------------------------------------------------------


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


def skip_fake_kernel_frames() -> int:
    """Tell dynamo never to compile a frame of a custom op's registered fake kernel; returns how many it marked.

    On meta tensors an eager call of a custom op runs its fake kernel as the Meta kernel (``construct_meta_kernel``):
    a Python frame dynamo compiles like user code, a graph no real device makes, since there the op runs its backend
    kernel, which ``torch.library.custom_op`` wraps in ``torch._disable_dynamo`` (transformers 5.17's
    ``grouped_mm_fallback``: its fake made 2 graphs and a recompile on the stand-in that the H200 never compiled).
    The fake kernel itself still answers FakeTensor propagation while dynamo traces: only its frames are skipped."""
    import os

    import torch

    registry = _require("torch._library.simple_registry", "singleton")
    skip = _require("torch._dynamo.eval_frame", "skip_code")
    own = os.path.dirname(torch.__file__) + os.sep
    codes: dict = {}
    for entry in list(getattr(registry, "_data", {}).values()):
        holder = getattr(entry, "fake_impl", None)
        kernels = list(getattr(holder, "kernels", None) or ([holder.kernel] if getattr(holder, "kernel", None) else []))
        for kernel in kernels:
            _user_codes(getattr(kernel, "func", kernel), codes, own)
    for code in codes.values():
        skip(code)
    return len(codes)


def _user_codes(fn: Any, found: dict, own: str, depth: int = 0) -> None:
    """The code objects outside torch that ``fn`` wraps: torch.library wraps a fake kernel in closures
    (``_check_pystubs_once``'s ``inner``, ``CustomOpDef``'s ``fake_impl`` calling ``_abstract_fn``)."""
    if depth > 4 or fn is None:
        return
    if not callable(fn) or not hasattr(fn, "__code__"):
        _user_codes(getattr(fn, "_abstract_fn", None), found, own, depth + 1)  # a CustomOpDef held by the closure
        return
    code = fn.__code__
    if not code.co_filename.startswith(own):
        found[id(code)] = code
    for target in [getattr(fn, "__wrapped__", None)] + [c.cell_contents for c in (fn.__closure__ or ()) if _filled(c)]:
        _user_codes(target, found, own, depth + 1)


def _filled(cell) -> bool:
    try:
        cell.cell_contents  # noqa: B018
    except ValueError:
        return False
    return True


def inductor_flag(name: str) -> Any:
    """Read an inductor config flag such as ``graph_partition`` or ``triton.cudagraph_trees``."""
    obj: Any = _require("torch._inductor", "config")
    for part in name.split("."):
        if not hasattr(obj, part):
            raise _missing(f"torch._inductor.config.{name}")
        obj = getattr(obj, part)
    return obj


def dynamo_flag(name: str) -> Any:
    cfg = _require("torch._dynamo", "config")
    if not hasattr(cfg, name):
        raise _missing(f"torch._dynamo.config.{name}")
    return getattr(cfg, name)


def storage_key(t: Any) -> Any:
    """A key equal for two tensors exactly when they share storage (also for fake/meta tensors)."""
    weak_ref = _require("torch.multiprocessing.reductions", "StorageWeakRef")
    return weak_ref(t.untyped_storage())


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


def inductor_config_patch(changes: dict[str, Any]):
    """A context manager that sets inductor config flags (``triton.cudagraphs``) and restores them."""
    return _require("torch._inductor", "config").patch(changes)


def higher_order_name(func: Any) -> str | None:
    """The name of a higher-order operator (``cond``, ``while_loop``, ``map_impl``, ``invoke_subgraph``,
    ``flex_attention``) a dispatch mode is handed, else None (an aten op)."""
    return func.name() if isinstance(func, higher_order_operator_type()) else None


def higher_order_in_traceback(exc: BaseException) -> str | None:
    """The higher-order operator (``cond``, ``while_loop``, ``map``, ``flex_attention``...) whose own
    code ``exc`` was raised in, by torch's module for it (``torch/_higher_order_ops/<name>.py``), else None.
    An error there while graphtool runs a model its own way (on fake tensors, under a dispatch mode)
    is graphtool's limit, not the user's mistake."""
    import os
    import traceback

    marker = f"{os.sep}torch{os.sep}_higher_order_ops{os.sep}"
    flex = os.path.join("torch", "nn", "attention", "flex_attention.py")  # its eager checks, before the op
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        if type(exc).__name__ == "UncapturedHigherOrderOpError":
            return "a higher-order op"
        for frame in traceback.extract_tb(exc.__traceback__):
            if frame.filename.endswith(flex):
                return "flex_attention"
            if marker in frame.filename:
                name = os.path.splitext(os.path.basename(frame.filename))[0]
                return "a higher-order op" if name in ("utils", "__init__") else name
        exc = exc.__cause__ or exc.__context__
    return None


def dispatch_mode_base():
    """``TorchDispatchMode``, the base of the stand-in's data-faking mode."""
    return _require("torch.utils._python_dispatch", "TorchDispatchMode")


def higher_order_operator_type():
    """``torch._ops.HigherOrderOperator``: ``torch.cond``, ``while_loop``, ``map``, ``invoke_subgraph``,
    flex attention... A dispatch mode sees them only with ``supports_higher_order_operators`` set."""
    return _require("torch._ops", "HigherOrderOperator")


def op_arguments(op: Any) -> list:
    """An ATen op overload's schema arguments (``.name``, ``.default_value``): ``op._schema.arguments``."""
    return list(op._schema.arguments)


def modes_can_take_higher_order_ops() -> bool:
    """Whether a ``TorchDispatchMode`` can declare ``supports_higher_order_operators`` (else a
    higher-order op under any mode raises NotImplementedError)."""
    return hasattr(dispatch_mode_base(), "supports_higher_order_operators")


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


def saved_values(grad_fn: Any) -> list[tuple[str, Any]]:
    """What an autograd node saved for backward, from its ``_saved_<name>`` attributes (the way
    torchviz reads them): ``[(name, value)]``. Empty once backward has freed them."""
    found = []
    for attr in sorted(a for a in dir(grad_fn) if a.startswith("_saved_")):
        try:
            found.append((attr[len("_saved_"):], getattr(grad_fn, attr)))
        except Exception:  # freed by backward (RuntimeError), or a value the binding cannot return
            continue
    return found


def higher_order_op_name(target: Any) -> str | None:
    """``higher_order.<name>`` for a higher-order operator (``with_effects``, ``cond``), as torch's
    graph printing names it; None for anything else."""
    ops = importlib.import_module("torch._ops")
    hop = getattr(ops, "HigherOrderOperator", None)
    if hop is not None and isinstance(target, hop):
        return f"higher_order.{target.name()}"
    return None


def is_view(t: Any) -> bool:
    """Whether a tensor is a view of another (``Tensor._is_view``)."""
    return bool(t._is_view())


def meta_nonzero_config():
    """A context manager letting ``nonzero`` run on meta (it assumes every element is non-zero),
    so a stand-in trace gets past boolean masking; a no-op where torch lacks the flag."""
    cfg = getattr(importlib.import_module("torch.fx.experimental._config"), "meta_nonzero_assume_all_nonzero", None)
    if cfg is None:
        import contextlib

        return contextlib.nullcontext()
    return importlib.import_module("torch.fx.experimental._config").patch(meta_nonzero_assume_all_nonzero=True)


def compile_backends() -> list[str]:
    """The torch.compile backends this torch knows (``torch._dynamo.list_backends``)."""
    names = _require("torch._dynamo", "list_backends")(exclude_tags=())
    return [n for n in names if "TESTING_ONLY" not in n]


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


def cudagraph_input_alignment() -> int:
    """The byte alignment CUDA-graph trees want of a static input's address (inductor's ``ALIGNMENT``);
    an unaligned one is copied instead, so it stops being static."""
    return int(_require("torch._inductor.utils", "ALIGNMENT"))


def compiler_stance() -> str:
    """The stance ``torch.compiler.set_stance`` last set (``"default"``, ``"force_eager"``...);
    torch has no public getter, so dynamo's own record of it is read."""
    return str(_require("torch._dynamo.eval_frame", "_stance").stance)


def tracing_stack() -> list[tuple[str, int, str]]:
    """``(file, line, function)`` of the user frames dynamo is tracing right now, outermost first
    (``TracingContext.extract_stack``: the frame being compiled at the line it reached, and any it
    is inlining); empty outside a trace."""
    ctx = _require("torch._guards", "TracingContext").try_get()
    if ctx is None:
        return []
    return [(f.filename, f.lineno, f.name) for f in ctx.extract_stack()]


def tracing_span() -> tuple[str, int, int, int] | None:
    """``(file, line, col, end_col)`` of the expression dynamo is tracing right now in its innermost
    frame (0-based columns of the instruction's source range, Python 3.11+); None outside a trace,
    before 3.11, or when the range spans lines."""
    ctx = _require("torch._guards", "TracingContext").try_get()
    stack = ctx.extract_stack() if ctx is not None else []
    if not stack:
        return None
    f = stack[-1]
    col, end_col = getattr(f, "colno", None), getattr(f, "end_colno", None)
    if col is None or end_col is None or getattr(f, "end_lineno", f.lineno) not in (None, f.lineno) or end_col <= col:
        return None
    return f.filename, f.lineno, col, end_col


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


def placeholder_source(node: Any) -> str | None:
    """Where dynamo took a graph input from, as its guards spell it (``L['y']``: a local of the
    compiled frame, ``G['w']``: a global, ``L['xs'][0]``), from the placeholder's ``grapharg``; None
    for a graph dynamo did not build (no ``grapharg``) or an input with no source."""
    source = getattr(node.meta.get("grapharg"), "source", None)
    name = getattr(source, "name", None)
    if name is None:
        return None
    return str(name() if callable(name) else name)


def symbol_sources(value: Any) -> dict[str, str]:
    """For a tensor with symbolic sizes (a fake tensor from a dynamic trace): each size symbol's name
    and the input it stands for, as dynamo's ShapeEnv records it (``{"s0": "L['x'].size()[0]"}``)."""
    found: dict[str, str] = {}
    for size in getattr(value, "shape", ()):
        node = getattr(size, "node", None)
        env = getattr(node, "shape_env", None)
        expr = getattr(node, "expr", None)
        if env is None or expr is None:
            continue
        sources = getattr(env, "var_to_sources", {})
        for sym in expr.free_symbols:
            if str(sym) not in found and sources.get(sym):
                name = sources[sym][0].name
                found[str(sym)] = name() if callable(name) else str(name)
    return found


def fake_tensor_mode():
    """A ``FakeTensorMode`` that also takes real tensors (converting them as they come): the eager run
    of a model built on meta goes through it, so code that asks whether it is being traced
    (transformers' ``is_tracing``: a fake tensor) skips its data-dependent checks, as under
    torch.compile, instead of calling ``.item()`` on meta."""
    return _require("torch._subclasses.fake_tensor", "FakeTensorMode")(allow_non_fake_inputs=True)


def maybe_mark_dynamic(t: Any, dim: int) -> None:
    """Ask dynamo to trace dimension ``dim`` of input ``t`` with a symbolic size, from the first
    compile on (``torch._dynamo.maybe_mark_dynamic``: no error where the model specializes it)."""
    _require("torch._dynamo", "maybe_mark_dynamic")(t, dim)


def mark_dynamic(t: Any, dim: int) -> None:
    """``torch._dynamo.mark_dynamic``: dimension ``dim`` of input ``t`` is symbolic from the first compile on
    (an error where the model specializes it)."""
    _require("torch._dynamo", "mark_dynamic")(t, dim)


#: the attributes ``mark_dynamic``, ``maybe_mark_dynamic``, ``mark_static`` and ``mark_unbacked`` set on a
#: tensor (sets of dimensions): what dynamo's guards read besides the sizes themselves
DYNAMIC_MARKS = ("_dynamo_dynamic_indices", "_dynamo_weak_dynamic_indices", "_dynamo_static_indices",
                 "_dynamo_unbacked_indices")


def dynamic_marks(t: Any) -> tuple:
    """``(attribute, sorted dims)`` for each dynamo mark on ``t`` (see :data:`DYNAMIC_MARKS`), for a key that
    tells two calls' inputs apart as dynamo's guards would."""
    return tuple((name, tuple(sorted(getattr(t, name)))) for name in DYNAMIC_MARKS if getattr(t, name, None))


# -- CUDA-graph catalogue (issue 15): torch's own per-node and per-graph checks ------------------
# Each symbol here has a test in tests/capture/test_compat_cudagraphs.py.


def is_cudagraph_unsafe_node(node: Any) -> bool:
    """``torch._inductor.utils.is_cudagraph_unsafe_fx_node``: forbidden ops (``_local_scalar_dense``,
    ``_assert_scalar``, rng-state ops), the ``cudagraph_unsafe`` tag, boolean ``index_put``, sparse outputs."""
    return bool(_require("torch._inductor.utils", "is_cudagraph_unsafe_fx_node")(node))


def forbidden_cudagraph_ops() -> frozenset:
    """``torch._inductor.utils.FORBIDDEN_CUDAGRAPH_OPS``: op names that are never capture-safe."""
    return frozenset(_require("torch._inductor.utils", "FORBIDDEN_CUDAGRAPH_OPS"))


def bool_index_put_node(node: Any) -> bool:
    """``torch._inductor.utils._fx_node_is_input_dependent_cudagraph_unsafe``: index_put with a boolean mask."""
    return bool(_require("torch._inductor.utils", "_fx_node_is_input_dependent_cudagraph_unsafe")(node))


def has_unbacked_symbols(value: Any) -> bool:
    """Whether a node's value carries unbacked symbols (``free_unbacked_symbols``), as the
    incompatible-op check asks."""
    return bool(_require("torch.fx.experimental.symbolic_shapes", "free_unbacked_symbols")(value))


def inductor_mutation_check(gm: Any, mutated_idxs, static_idxs) -> str | None:
    """inductor's compile-time mutation check (``cudagraph_utils.check_for_mutation_ignore_cuda_graph_managed_tensor``,
    the four-argument one; the cudagraphs backend has a two-argument namesake)."""
    check = _require("torch._inductor.cudagraph_utils", "check_for_mutation_ignore_cuda_graph_managed_tensor")
    ordered = _require("torch.utils._ordered_set", "OrderedSet")
    return check(gm, ordered(str(i) for i in mutated_idxs), ordered(sorted(mutated_idxs)), sorted(static_idxs))


def cudagraphs_backend_check(gm: Any, num_fixed: int) -> str | None:
    """``torch._dynamo.backends.cudagraphs.check_for_skip``: the cudagraphs backend's whole-graph check."""
    return _require("torch._dynamo.backends.cudagraphs", "check_for_skip")(gm, num_fixed)


def has_inductor_flag(name: str) -> bool:
    """Whether this torch's inductor config has ``name`` (``triton.cudagraph_min_partition_size`` arrived in 2.12)."""
    obj: Any = _require("torch._inductor", "config")
    for part in name.split("."):
        if not hasattr(obj, part):
            return False
        obj = getattr(obj, part)
    return True


def dynamo_config_patch(changes: dict[str, Any]):
    """A context manager that sets dynamo config flags and restores them."""
    return _require("torch._dynamo", "config").patch(changes)


def cudagraph_annotation(gm: Any) -> tuple[bool | None, bool | None] | None:
    """The ``torch._dynamo.override_cudagraphs`` annotation dynamo put on its graph
    (``gm.meta["cudagraph_annotation"]``, 2.12+) as ``(fwd, bwd)``; None without one."""
    ann = getattr(gm, "meta", {}).get("cudagraph_annotation")
    if ann is None:
        return None
    return getattr(ann, "fwd", None), getattr(ann, "bwd", None)


# --- DDP under torch.compile (issue 26): dynamo's DDPOptimizer -------------------------------------

class _EnoughBuckets(Exception):
    """Raised by a stand-in backend once DDPOptimizer has chosen its buckets: nothing is compiled."""


def ddp_optimizer_class() -> Any:
    """``torch._dynamo.backends.distributed.DDPOptimizer``: the pass that splits a dynamo graph at
    DDP's bucket boundaries (``optimize_ddp="ddp_optimizer"``, the default). graphtool reads its
    ``compile_fn`` and the ``buckets`` it stashes (``size``, ``params``, ``param_ids``, ``nodes``)."""
    cls = _require("torch._dynamo.backends.distributed", "DDPOptimizer")
    if not callable(getattr(cls, "compile_fn", None)):
        raise _missing("torch._dynamo.backends.distributed.DDPOptimizer.compile_fn")
    return cls


def ddp_first_bucket_bytes() -> int:
    """``torch.distributed._DEFAULT_FIRST_BUCKET_BYTES``: the first bucket's cap dynamo's DDPOptimizer
    uses whatever DDP's ``bucket_cap_mb`` (convert_frame builds it without ``first_bucket_cap``)."""
    return int(_require("torch.distributed", "_DEFAULT_FIRST_BUCKET_BYTES"))


def optimize_ddp_on():
    """dynamo's ``optimize_ddp`` set to ``"ddp_optimizer"`` (the default; a script may have changed it)."""
    return dynamo_config_patch({"optimize_ddp": "ddp_optimizer"})


@contextlib.contextmanager
def recording_ddp_splits(records: list, before: Any = None):
    """While open, every DDPOptimizer split appends ``(optimizer, gm, example_inputs)`` to ``records``
    (after torch chose the buckets, whether or not compiling the pieces then succeeded);
    ``before(gm, example_inputs)`` runs first."""
    cls = ddp_optimizer_class()
    original = cls.compile_fn

    def compile_fn(self, gm, example_inputs, **configs):
        if before is not None:
            before(gm, example_inputs)
        try:
            return original(self, gm, example_inputs, **configs)
        finally:
            if getattr(self, "buckets", None) is not None:
                records.append((self, gm, list(example_inputs)))

    cls.compile_fn = compile_fn
    cls._graphtool_original_compile_fn = original
    try:
        yield records
    finally:
        cls.compile_fn = original
        del cls._graphtool_original_compile_fn


def ddp_buckets_at(gm: Any, example_inputs: list, bucket_bytes: int) -> list:
    """The buckets torch's own DDPOptimizer chooses for ``gm`` at a bucket cap of ``bucket_bytes``,
    without compiling anything: torch logs the buckets (``pretty_print_buckets``) right after it
    stashes them, and graphtool stops it there (else at its backend, after the split)."""
    module = importlib.import_module("torch._dynamo.backends.distributed")
    cls = ddp_optimizer_class()

    def stop(*_args, **_kw):
        raise _EnoughBuckets

    opt = cls(bucket_bytes_cap=bucket_bytes, backend_compile_fn=stop)
    original_log = getattr(module, "pretty_print_buckets", None)
    if original_log is not None:
        module.pretty_print_buckets = stop
    try:
        cls.__dict__.get("_graphtool_original_compile_fn", cls.compile_fn)(opt, gm, example_inputs)
    except _EnoughBuckets:
        pass
    finally:
        if original_log is not None:
            module.pretty_print_buckets = original_log
    return list(opt.buckets)


# --- FSDP2 under torch.compile (issue 26): fully_shard in a fake process group ----------------------

def fake_store_class() -> Any:
    """``torch.testing._internal.distributed.fake_pg.FakeStore``: with it, ``init_process_group("fake")``
    makes a group of any world size in one process whose collectives do nothing (rank 0's view)."""
    return _require("torch.testing._internal.distributed.fake_pg", "FakeStore")


def init_fake_process_group(world_size: int, rank: int = 0) -> None:
    """The default process group as ``rank`` of ``world_size`` ranks, none of which exists: one process
    stands for any rank of any world size (``--ddp``, ``--fsdp2``). Its collectives return without
    communicating (DDP's allreduce hook then yields None: give DDP a comm hook)."""
    import torch.distributed as dist

    dist.init_process_group("fake", store=fake_store_class()(), rank=rank, world_size=world_size)


def fsdp_param_group(module: Any) -> Any:
    """The ``FSDPParamGroup`` that ``fully_shard(module)`` made (``None``: the module manages no
    parameter of its own), via ``FSDPModule._get_fsdp_state()._fsdp_param_group``."""
    state = getattr(module, "_get_fsdp_state", None)
    if state is None:
        raise _missing("FSDPModule._get_fsdp_state")
    return getattr(state(), "_fsdp_param_group", None)


def fsdp_param_sizes(group: Any) -> list[tuple[str, tuple, tuple, tuple, Any]]:
    """Each parameter of an ``FSDPParamGroup`` as ``(fqn, full shape, local shard shape on this
    rank, padded shard shape, dtype)``: FSDP2 pads dim 0 to a multiple of the world size and keeps the
    padded shard (``padded_sharded_param_size``). The names are set at the root's lazy init (its first forward)."""
    out = []
    for fp in group.fsdp_params:
        for attr in ("_param_fqn", "_orig_size", "sharded_size", "padded_sharded_param_size"):
            if not hasattr(fp, attr):
                raise _missing(f"FSDPParam.{attr}")
        out.append((str(fp._param_fqn), tuple(fp._orig_size), tuple(fp.sharded_size),
                    tuple(fp.padded_sharded_param_size), fp.sharded_param.dtype))
    return out


def recompile_module(module: Any, backend: Any) -> bool:
    """A module the user compiled with ``module.compile()`` (``nn.Module._compiled_call_impl``, its
    ``_call_impl`` under ``torch.compile``) compiled again the same way with ``backend``; False for
    a module not compiled so."""
    import torch

    if getattr(module, "_compiled_call_impl", None) is None:
        return False
    call_impl = getattr(module, "_call_impl", None)
    if call_impl is None:
        raise _missing("torch.nn.Module._call_impl")
    module._compiled_call_impl = torch.compile(call_impl, backend=backend)
    return True


def skip_fsdp_hooks() -> bool:
    """Whether FSDP2's hooks, and their collectives, run eagerly outside the graphs: dynamo's
    ``skip_fsdp_hooks`` where a release has it (True by default; False traced them, "traceable
    FSDP2"); torch 2.13 and 2.14 have no such flag and always run them eagerly (True)."""
    return bool(getattr(_require("torch._dynamo", "config"), "skip_fsdp_hooks", True))


@contextlib.contextmanager
def fsdp2_on_meta(model: Any):
    """While open, ``model`` (``fully_shard``ed over meta parameters, FSDP2's way of deferring
    initialisation) runs its FSDP2 steps on meta, the accelerator stand-in: each ``FSDPParamGroup``
    and ``FSDPParam`` allocates its all-gather and reduce-scatter buffers on meta (``.device``; the
    mesh stays the fake group's cpu one, whose stream and event stubs FSDP2 waits on), the all-gather's
    stream handle for meta is the cpu one (``_fsdp_collectives._get_device_handle``), and the lazy
    init's "parameters should be materialized from meta device" check says yes. The fake group's
    collectives touch no data, so nothing else needs a value."""
    import torch

    group_cls = _require("torch.distributed.fsdp._fully_shard._fsdp_param_group", "FSDPParamGroup")
    collectives = importlib.import_module("torch.distributed.fsdp._fully_shard._fsdp_collectives")
    handle = getattr(collectives, "_get_device_handle", None)
    check = getattr(group_cls, "_validate_no_meta_params", None)
    if handle is None:
        raise _missing("torch.distributed.fsdp._fully_shard._fsdp_collectives._get_device_handle")
    if check is None:
        raise _missing("FSDPParamGroup._validate_no_meta_params")
    meta = torch.device("meta")
    for module in model.modules():
        group = fsdp_param_group(module) if hasattr(module, "_get_fsdp_state") else None
        if group is None:
            continue
        if not hasattr(group, "device") or not all(hasattr(fp, "device") for fp in group.fsdp_params):
            raise _missing("FSDPParamGroup.device / FSDPParam.device")
        group.device = meta
        for fp in group.fsdp_params:
            fp.device = meta

    def handle_for(device_type: str = "cuda") -> Any:
        return torch.cpu if device_type == "meta" else handle(device_type)

    # 2.15: foreach_reduce records the reduce-scatter's output buffer on its stream through a custom op
    # that reads ``stream.stream_id``, which the cpu stream stub standing for meta's lacks; it skips cpu
    # buffers itself (no device free to order), and a meta buffer has none either
    record = getattr(collectives, "record_grad_output_stream", None)

    def record_for(buffer: Any, stream: Any) -> None:
        if buffer.device.type != "meta":
            record(buffer, stream)

    collectives._get_device_handle = handle_for
    group_cls._validate_no_meta_params = lambda self: None
    if record is not None:
        collectives.record_grad_output_stream = record_for
    try:
        yield model
    finally:
        collectives._get_device_handle = handle
        group_cls._validate_no_meta_params = check
        if record is not None:
            collectives.record_grad_output_stream = record


#: the torch.distributed functions FSDP2's hooks call for its collectives (2.13: ``all_gather_single``,
#: ``reduce_scatter_single``; older releases ``all_gather_into_tensor``, ``reduce_scatter_tensor``;
#: HSDP adds ``all_reduce``)
FSDP_COLLECTIVES = ("all_gather_single", "all_gather_into_tensor", "reduce_scatter_single", "reduce_scatter_tensor",
                    "all_reduce")


@contextlib.contextmanager
def recording_fsdp_collectives(records: list, name_of: Any):
    """While open, each collective FSDP2 runs eagerly appends ``(op, output bytes, input bytes, unit)``
    to ``records``: ``unit`` is ``name_of(group)`` for the ``FSDPParamGroup`` whose ``unshard`` or
    ``post_backward`` issued it (None outside them). The public ``torch.distributed`` functions are
    wrapped (a dispatch mode would see the c10d ops, but dynamo compiles nothing under one); a call
    made by another wrapped call is not counted twice."""
    import torch.distributed as dist

    group_cls = _require("torch.distributed.fsdp._fully_shard._fsdp_param_group", "FSDPParamGroup")
    current: list = []
    depth = [0]
    patched: list = []
    for method in ("unshard", "post_backward"):
        original = getattr(group_cls, method, None)
        if original is None:
            raise _missing(f"FSDPParamGroup.{method}")

        def in_group(self, *args, __original=original, **kwargs):
            current.append(self)
            try:
                return __original(self, *args, **kwargs)
            finally:
                current.pop()

        patched.append((group_cls, method, original))
        setattr(group_cls, method, in_group)
    for name in FSDP_COLLECTIVES:
        original = getattr(dist, name, None)
        if original is None:
            continue

        def counted(*args, __original=original, __name=name, **kwargs):
            if depth[0] == 0 and current:
                tensors = [a for a in (*args, *kwargs.values()) if hasattr(a, "element_size")]
                sizes = [int(t.numel() * t.element_size()) for t in tensors]
                records.append((__name, sizes[0] if sizes else 0, sizes[1] if len(sizes) > 1 else 0,
                                name_of(current[-1])))
            depth[0] += 1
            try:
                return __original(*args, **kwargs)
            finally:
                depth[0] -= 1

        patched.append((dist, name, original))
        setattr(dist, name, counted)
    try:
        yield records
    finally:
        for owner, name, original in reversed(patched):
            setattr(owner, name, original)


class _ReducerOnMeta:
    """DDP's reducer, but ``_rebuild_buckets`` says no: after the first step the C++ reducer
    copies the gradients into buckets rebuilt in ready order, which meta tensors cannot do. The
    rebuild moves no split (DDPOptimizer splits at compile time, by parameter bytes), so the
    stand-in skips it; every other call reaches the real reducer."""

    def __init__(self, reducer: Any, before_forward: Any = None):
        self._reducer = reducer
        self._before_forward = before_forward

    def __getattr__(self, name: str) -> Any:
        return getattr(self._reducer, name)

    def _rebuild_buckets(self) -> bool:
        if self._before_forward is not None:  # where the real reducer checks the prior step's reduction
            self._before_forward()
        return False


class _LoggerOnMeta:
    """DDP's C++ logger, but ``set_runtime_stats_and_log`` (each forward) does nothing: on meta it records
    no time stats anyway and only prints, from C++ straight to stderr, "[rank0]:[W...] logger.cpp:329
    Warning: Time stats are currently only collected for CPU and CUDA devices" (TORCH_CPP_LOG_LEVEL,
    which would hide it, is read once, when torch is imported). Every other call reaches the real logger."""

    def __init__(self, logger: Any):
        self._logger = logger

    def __getattr__(self, name: str) -> Any:
        return getattr(self._logger, name)

    def set_runtime_stats_and_log(self) -> None:
        pass


def ddp_on_meta(ddp: Any, before_forward: Any = None, *, quiet: bool = True) -> Any:
    """A ``DistributedDataParallel`` built with ``init_sync=False`` over meta parameters, made to run
    its steps on meta: a comm hook that hands each bucket back as its allreduce's result (what an
    allreduce of one rank gives; gloo cannot reduce meta tensors), and the reducer's bucket rebuild
    skipped (:class:`_ReducerOnMeta`). The forward's hooks, ``_DDPSink`` and the reducer's autograd
    hooks run as on a GPU. ``before_forward()`` runs where the reducer would check that the prior
    step's reduction ended (DDP's forward, grad enabled). ``quiet`` (no ``--debug``): the logger's warning
    about meta's missing timer is left out (:class:`_LoggerOnMeta`)."""
    import torch

    reducer = getattr(ddp, "reducer", None)
    if reducer is None or not callable(getattr(reducer, "_rebuild_buckets", None)):
        raise _missing("DistributedDataParallel.reducer._rebuild_buckets")

    def handed_back(_state, bucket):
        fut = torch.futures.Future()
        fut.set_result(bucket.buffer())
        return fut

    ddp.register_comm_hook(None, handed_back)
    ddp.reducer = _ReducerOnMeta(reducer, before_forward)
    if quiet and callable(getattr(getattr(ddp, "logger", None), "set_runtime_stats_and_log", None)):
        ddp.logger = _LoggerOnMeta(ddp.logger)
    return ddp


def ddp_bucket_sizes(ddp: Any) -> dict:
    """DDP's own account of its gradient buckets, from ``DistributedDataParallel._get_ddp_logging_data()``
    (what torch logs through ``DDPLoggingData``): ``bucket_sizes`` (bytes of each flat bucket tensor the
    reducer allocated), ``total_parameter_size_bytes`` (the parameters it reduces) and
    ``gradient_as_bucket_view``."""
    getter = getattr(ddp, "_get_ddp_logging_data", None)
    if not callable(getter):
        raise _missing("DistributedDataParallel._get_ddp_logging_data")
    data = getter()
    sizes = str(data.get("bucket_sizes", "")).replace(" ", "")
    return {
        "bucket_sizes": [int(s) for s in sizes.split(",") if s],
        "total_parameter_size_bytes": int(data.get("total_parameter_size_bytes", 0)),
        "gradient_as_bucket_view": bool(int(data.get("gradient_as_bucket_view", 0))),
    }


def process_group_sizes() -> dict[str, int]:
    """Each live process group's name (what a functional collective in a graph names its group by:
    ``_c10d_functional.all_reduce(x, "sum", "0")``) -> its number of ranks, from ``distributed_c10d._world.pg_names``;
    empty where torch keeps no such table."""
    c10d = importlib.import_module("torch.distributed.distributed_c10d")
    names = getattr(getattr(c10d, "_world", None), "pg_names", None)
    if not isinstance(names, dict):
        return {}
    return {str(name): int(pg.size()) for pg, name in names.items()}


# -- the activation-memory budget: torch's own partitioner, rerun on the joint graph it partitioned --------


def has_activation_memory_budget() -> bool:
    """Whether this torch's functorch config has ``activation_memory_budget`` (every supported torch does)."""
    cfg = _require("torch._functorch", "config")
    return hasattr(cfg, "activation_memory_budget")


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
    from unittest import mock

    def recording_over(original):
        @functools.wraps(original)
        def recording(joint_module, joint_inputs, *args, **kwargs):
            records.append(JointRecord(_copy_graph_module(joint_module), joint_inputs, dict(kwargs, _args=args)))
            return original(joint_module, joint_inputs, *args, **kwargs)

        return recording

    # import both before patching either: compile_fx binds the partitioner's name when first imported, and a
    # first import under the patch would keep the recording wrapper for good
    modules = [importlib.import_module(name) for name in ("torch._functorch.partitioners", "torch._inductor.compile_fx")]
    with contextlib.ExitStack() as stack:
        for module in modules:
            original = getattr(module, "min_cut_rematerialization_partition", None)
            if original is not None:
                stack.enter_context(mock.patch.object(module, "min_cut_rematerialization_partition",
                                                      recording_over(original)))
        yield records


def partition_at_budget(record: JointRecord, budget: float) -> tuple[Any, Any]:
    """``(forward, backward)``: torch's own ``min_cut_rematerialization_partition`` run again on a copy of
    ``record``'s joint graph with ``torch._functorch.config.activation_memory_budget`` set to ``budget``."""
    partitioners = importlib.import_module("torch._functorch.partitioners")
    partition = getattr(partitioners.min_cut_rematerialization_partition, "__wrapped__",
                        partitioners.min_cut_rematerialization_partition)
    cfg = _require("torch._functorch", "config")
    kwargs = dict(record.kwargs)
    args = kwargs.pop("_args", ())
    with cfg.patch({"activation_memory_budget": float(budget)}):
        return partition(_copy_graph_module(record.joint), record.joint_inputs, *args, **kwargs)


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


def storage_weak_ref(t: Any) -> Any:
    """A weak reference to ``t``'s storage (``.expired()``, ``.cdata``): torch's ``StorageWeakRef``."""
    cls = _require("torch.multiprocessing.reductions", "StorageWeakRef")
    return cls(t.untyped_storage())


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
