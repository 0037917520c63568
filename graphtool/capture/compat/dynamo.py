"""Dynamo, torch.compile's front end (``torch._dynamo``, ``torch._guards``): forgetting compiled frames
(:func:`dynamo_reset`, with the import cache and aliases dynamo leaves behind), the backends it knows, the
stance ``set_stance`` set, what it is tracing right now (the TracingContext, its user stack and the span of
the expression), where each graph input and size symbol came from (guard sources, the ShapeEnv), the dynamic
marks on an input, fake tensors, the frames of custom ops' fake kernels it must skip, ``module.compile()``
redone with another backend, the structured-trace logger graph breaks arrive on, and the config flags of
dynamo and inductor (read, checked for, patched)."""

from __future__ import annotations

from typing import Any

from graphtool.capture.compat._lookup import _missing, _optional, _require


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


_USER_ALIAS = "__import_graphtool_user_"  # dynamo's alias of a script capture/user/script.py loaded


def dynamo_import_module_cache():
    """``torch._dynamo.symbolic_convert._import_module`` when it is a cached function, else None."""
    fn = _optional("torch._dynamo.symbolic_convert", "_import_module")
    return fn if callable(getattr(fn, "cache_clear", None)) else None


def is_fake_tensor(t) -> bool:
    """Whether ``t`` is one of dynamo's FakeTensors (its fake runs of user ops)."""
    return isinstance(t, _require("torch._subclasses.fake_tensor", "FakeTensor"))


def tracing_context_active() -> bool:
    """Whether torch.compile is tracing or compiling right now (``torch._guards.TracingContext``)."""
    ctx_cls = _require("torch._guards", "TracingContext")
    return ctx_cls.try_get() is not None


#: the logger TORCH_TRACE and tlparse read; graph-break artifacts arrive here.
STRUCTURED_TRACE_LOGGER = "torch.__trace"


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


def inductor_config_patch(changes: dict[str, Any]):
    """A context manager that sets inductor config flags (``triton.cudagraphs``) and restores them."""
    return _require("torch._inductor", "config").patch(changes)


def compile_backends() -> list[str]:
    """The torch.compile backends this torch knows (``torch._dynamo.list_backends``)."""
    names = _require("torch._dynamo", "list_backends")(exclude_tags=())
    return [n for n in names if "TESTING_ONLY" not in n]


def compiled_autograd_captures() -> int:
    """How many autograd graphs compiled autograd (``torch._dynamo.config.compiled_autograd``) has captured in this
    process: dynamo's ``counters["compiled_autograd"]["captures"]``."""
    counters = _require("torch._dynamo.utils", "counters")
    return int(counters["compiled_autograd"].get("captures", 0))


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


#: the guards dynamo installs on a Python value itself (``L['pos'] == 3``), not on its type or identity
_VALUE_GUARD_KINDS = ("CONSTANT_MATCH", "EQUALS_MATCH")


def value_guards() -> list[tuple[str, Any, tuple, str]]:
    """``(local name, value, ((file, line, function), ...), frame's function)`` for each guard on the value of a plain int or float
    local of the frame dynamo is compiling now (an argument such as ``pos``, or the number a graph break handed to
    its resume function, ``___stack0``: a ``.item()``'s result): dynamo baked that value into the graph, and a call
    with another value fails the guard and compiles again. The frames are the guard's user stack, innermost last
    (where the value is used). Read from the TracingContext's guards and the frame's locals (a backend's call);
    empty outside a trace."""
    ctx = _require("torch._guards", "TracingContext").try_get()
    if ctx is None:
        return []
    tx = _require("torch._dynamo.symbolic_convert", "InstructionTranslator").current_tx()
    if tx is None:
        return []
    local_source = _require("torch._dynamo.source", "LocalSource")
    values = getattr(tx, "f_locals", None) or {}
    found = []
    for guard in ctx.guards_context.dynamo_guards:
        make = guard.create_fn
        kind = getattr(make, "__name__", None) or getattr(getattr(make, "func", None), "__name__", "")
        source = guard.originating_source
        if kind not in _VALUE_GUARD_KINDS or type(source) is not local_source:
            continue
        name = source.local_name
        value = values.get(name)
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            continue
        frames = tuple((f.filename, f.lineno, f.name) for f in (guard.user_stack or ()))
        found.append((name, value, frames, tx.f_code.co_name))
    return found


def int_input_sources(gm: Any) -> list[str | None]:
    """For each integer input of ``gm`` (an AOT graph), in order (the integers a call of it gets): the input it stands
    for, as dynamo's ShapeEnv records the symbol's source (``L['pos']`` for an int argument, ``L['x'].size()[1]`` for
    a size), or None (a plain int, or a symbol derived from others)."""
    import torch

    out: list[str | None] = []
    for node in gm.graph.nodes:
        if node.op != "placeholder":
            continue
        v = node.meta.get("val")
        if isinstance(v, bool) or not isinstance(v, (int, torch.SymInt)):
            continue
        sym = getattr(getattr(v, "node", None), "expr", None)
        env = getattr(getattr(v, "node", None), "shape_env", None)
        sources = getattr(env, "var_to_sources", {}).get(sym) if sym is not None and getattr(sym, "is_Symbol", False) else None
        name = getattr(sources[0], "name", None) if sources else None
        out.append((name() if callable(name) else str(name)) if name is not None else None)
    return out


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


def dynamo_counters() -> Any:
    """Dynamo's own counters (``torch._dynamo.utils.counters``: a dict of ``collections.Counter``), what torch's
    benchmarks read ``stats.calls_captured`` and ``frames.total``/``frames.ok`` from."""
    return _require("torch._dynamo.utils", "counters")


def capture_counters() -> dict[str, int]:
    """The capture figures of dynamo's counters now: ``calls_captured`` (FX nodes whose op is a call that dynamo put
    into graphs), ``unique_graphs``, ``frames_total``, ``frames_ok`` and ``graph_breaks`` (the sum of
    ``counters["graph_break"]``, which counts a break again per recompile). Cumulative over the process: subtract
    two readings (:func:`counters_since`)."""
    c = dynamo_counters()
    return {"calls_captured": int(c["stats"].get("calls_captured", 0)), "unique_graphs": int(c["stats"].get("unique_graphs", 0)),
            "frames_total": int(c["frames"].get("total", 0)), "frames_ok": int(c["frames"].get("ok", 0)),
            "graph_breaks": int(sum(c["graph_break"].values()))}


def counters_since(before: dict[str, int]) -> dict[str, int]:
    """:func:`capture_counters` now minus ``before``, with ``fallbacks_to_eager`` (frames total minus frames ok, as
    torch's benchmarks count it)."""
    now = capture_counters()
    out = {k: now[k] - before.get(k, 0) for k in now}
    out["fallbacks_to_eager"] = out["frames_total"] - out["frames_ok"]
    return out


def has_dynamo_flag(name: str) -> bool:
    """Whether this torch's dynamo config has ``name`` (``nested_graph_breaks``: 2.13 and 2.15 have it, off by default)."""
    return hasattr(_require("torch._dynamo", "config"), name)
