"""The blocks a model repeats, as dynamo sees them: which modules could be compiled on their own, what each was
called with, what dynamo makes of each, and what would go wrong compiling them one by one.

- :func:`candidate_groups`: modules of one class that hold submodules, two or more of them, outermost first (a
  decoder's ``LlamaDecoderLayer`` x N; not the ``Linear`` layers inside them);
- :class:`FirstCalls`: hooks that keep each candidate's first call (its inputs, detached, and whether an output
  is one of its inputs) during an eager step;
- :func:`probe_group`: each instance compiled on its own by dynamo alone (a recording backend, no code
  generation) in the order a loop would compile them, with no reset between them, as ``torch.compile`` on each
  block does: an instance whose guards pass reuses a compiled graph (which one is recorded when it runs), one
  whose guards fail recompiles with torch's reason. Each graph has a structural hash (ops, targets, argument
  structure, shapes and dtypes), so instances are the same when the graphs that ran for them hash the same;
- :func:`module_facts`: what tells two instances apart when their graphs differ (parameter shapes, plain
  attributes, and which attributes ``forward`` reads).

Everything returned is plain data (dicts of strings and numbers) for the child's JSON result.
"""

from __future__ import annotations

import hashlib
import inspect
import re
from collections import Counter
from dataclasses import dataclass
from typing import Any

from graphtool.capture import compat
from graphtool.capture.tensors import iter_tensors, map_tensors

_CONTAINERS = ("ModuleList", "Sequential", "ModuleDict", "ParameterList", "ParameterDict")


@dataclass(frozen=True)
class Candidate:
    """Modules of one class (``cls``) that could be compiled one by one: ``fqns`` in ``named_modules`` order."""

    cls: str
    fqns: tuple[str, ...]
    nested_in: str | None = None  # the outer candidate class these sit inside (a nested repeat)


def candidate_groups(model: Any) -> list[Candidate]:
    """Classes with two or more instances that hold submodules (blocks, not leaves), containers aside: the
    outermost first, each instance inside an outer candidate's instance listed as nested (``nested_in``).

    >>> import torch.nn as nn
    >>> class B(nn.Module):
    ...     def __init__(self): super().__init__(); self.fc = nn.Linear(2, 2)
    >>> m = nn.Sequential(B(), B(), nn.Linear(2, 2))
    >>> candidate_groups(m)
    [Candidate(cls='B', fqns=('0', '1'), nested_in=None)]
    """
    by_class: dict[type, list[str]] = {}
    depth: dict[type, int] = {}
    for fqn, mod in model.named_modules(remove_duplicate=True):
        cls = type(mod)
        if not fqn or cls.__name__ in _CONTAINERS or not any(True for _ in mod.children()):
            continue
        by_class.setdefault(cls, []).append(fqn)
        depth[cls] = min(depth.get(cls, 99), fqn.count(".") + 1)
    picked: list[Candidate] = []
    outer: dict[str, str] = {}  # fqn of an instance already picked -> its class
    for cls in sorted(by_class, key=lambda c: (depth[c], by_class[c][0])):
        fqns = by_class[cls]
        if len(fqns) < 2:
            continue
        owners = [_owner(f, outer) for f in fqns]
        free = [f for f, o in zip(fqns, owners) if o is None]
        if len(free) >= 2:
            picked.append(Candidate(cls.__name__, tuple(free)))
            outer.update(dict.fromkeys(free, cls.__name__))
        # a nested repeat: two or more inside one outer instance (a layer's experts), not one in each (its MLP)
        per_owner = Counter(o for o in owners if o is not None)
        if per_owner and max(per_owner.values()) >= 2:
            nested = [f for f, o in zip(fqns, owners) if o is not None]
            picked.append(Candidate(cls.__name__, tuple(nested), nested_in=outer[next(o for o in owners if o)]))
    return picked


def _owner(fqn: str, outer: dict[str, str]) -> str | None:
    """The picked instance ``fqn`` sits inside, if any."""
    parts = fqn.split(".")
    for i in range(len(parts) - 1, 0, -1):
        owner = ".".join(parts[:i])
        if owner in outer:
            return owner
    return None


class FirstCalls:
    """Forward hooks on ``modules`` (fqn -> module) that keep each one's first call: its inputs (tensors detached,
    ``requires_grad`` kept, so dynamo's guards see what the model's run gave it) and the outputs that are one of
    its inputs (the same storage). Use as a context manager around one eager step."""

    def __init__(self, modules: dict[str, Any]):
        self.modules = modules
        self.calls: dict[str, tuple[tuple, dict]] = {}
        self.aliased: dict[str, list[str]] = {}
        self._handles: list = []

    def __enter__(self) -> FirstCalls:
        for fqn, mod in self.modules.items():
            self._handles.append(mod.register_forward_pre_hook(self._pre(fqn), with_kwargs=True))
            self._handles.append(mod.register_forward_hook(self._post(fqn), with_kwargs=True))
        return self

    def __exit__(self, *exc) -> None:
        for h in self._handles:
            h.remove()
        self._handles.clear()

    def _pre(self, fqn: str):
        def hook(mod, args, kwargs):
            if fqn not in self.calls:
                self.calls[fqn] = (map_tensors(args, _detached), map_tensors(dict(kwargs), _detached))
        return hook

    def _post(self, fqn: str):
        def hook(mod, args, kwargs, output):
            if fqn in self.aliased:
                return
            ins = {_storage(t): name for name, t in _named_inputs(args, kwargs)}
            same = []
            for i, t in enumerate(iter_tensors(output)):
                name = ins.get(_storage(t))
                if name is not None:
                    same.append(f"output {i} is {name}")
            self.aliased[fqn] = same
        return hook


def _detached(t):
    return t.detach().requires_grad_(t.requires_grad) if t.is_floating_point() or t.is_complex() else t.detach()


def _storage(t) -> tuple:
    try:
        return (t.device.type, t.untyped_storage().data_ptr())
    except (RuntimeError, NotImplementedError):  # a tensor without storage (a subclass, meta): never aliased here
        return ("none", id(t))


def _named_inputs(args: tuple, kwargs: dict):
    import torch

    for i, a in enumerate(args):
        if isinstance(a, torch.Tensor):
            yield f"input {i}", a
    for k, v in kwargs.items():
        if isinstance(v, torch.Tensor):
            yield f"input {k!r}", v


def graph_hash(gm: Any) -> str:
    """A structural hash of a dynamo graph: each node's op, target, arguments (other nodes by position) and value
    (shape and dtype). Two instances of one class compiled alone give the same hash when dynamo made the same graph
    of them; names of the instance's own parameters are relative to ``self``, so they agree.

    >>> import torch
    >>> gm = torch.fx.symbolic_trace(torch.nn.Linear(2, 2))
    >>> graph_hash(gm) == graph_hash(torch.fx.symbolic_trace(torch.nn.Linear(2, 2)))
    True
    """
    index: dict[Any, int] = {}
    lines = []
    for i, n in enumerate(gm.graph.nodes):
        index[n] = i
        lines.append(f"{n.op} {_target(n)} {_arg(n.args, index)} {_arg(n.kwargs, index)} {_value(n.meta.get('example_value'))}")
    return hashlib.sha1("\n".join(lines).encode()).hexdigest()[:16]


def _target(n) -> str:
    t = n.target
    if isinstance(t, str):
        return t
    return f"{getattr(t, '__module__', '') or ''}.{getattr(t, '__qualname__', None) or getattr(t, '__name__', None) or t}"


def _arg(a: Any, index: dict) -> str:
    if a.__class__.__name__ == "Node":
        return f"%{index.get(a, '?')}"
    if isinstance(a, (list, tuple)):
        return "(" + ",".join(_arg(x, index) for x in a) + ")"
    if isinstance(a, dict):
        return "{" + ",".join(f"{k}:{_arg(v, index)}" for k, v in a.items()) + "}"
    text = repr(a)
    return re.sub(r" at 0x[0-9a-f]+", "", text)  # an object's address is not its structure


def _value(v: Any) -> str:
    import torch

    if isinstance(v, torch.Tensor):
        return f"{str(v.dtype).removeprefix('torch.')}{list(v.shape)}"
    if isinstance(v, (list, tuple)):
        return "(" + ",".join(_value(x) for x in v) + ")"
    return "" if v is None else type(v).__name__


def op_nodes(gm: Any) -> list:
    """The nodes that compute (calls), not the graph's inputs, outputs or attribute reads."""
    return [n for n in gm.graph.nodes if n.op.startswith("call")]


def module_stacks(gm: Any) -> list[dict]:
    """The op nodes of a dynamo graph by module stack: ``[{"stack": [[path, class], ...], "nodes": n}]``, each
    stack as dynamo records it (``nn_module_stack`` source paths, outermost first); the analysis names them
    (:func:`graphtool.analysis.module_names.module_fqn`). Nodes outside every module have an empty stack."""
    counts: Counter = Counter()
    for n in op_nodes(gm):
        stack = n.meta.get("nn_module_stack") or {}
        counts[tuple((str(path), getattr(cls, "__name__", None) or str(cls).rsplit(".", 1)[-1].strip("'>"))
                     for path, cls in stack.values())] += 1
    return [{"stack": [list(p) for p in stack], "nodes": k} for stack, k in counts.items()]


def probe_group(torch: Any, modules: dict[str, Any], calls: dict[str, tuple[tuple, dict]]) -> list[dict]:
    """Each instance of one class compiled by dynamo alone, in order, with no reset between them (see the module's
    docstring): per instance its ``fqn``, the hashes of the graphs that ran for it (``graphs``), the compiles it
    caused (``compiles``, each with its ``compile_id``, ``nodes`` and torch's ``recompile_reason``), or the error
    that stopped dynamo (``error``). dynamo's frames are reset before and after."""
    graphs: list[dict] = []
    ran: list[int] = []

    def backend(gm, example_inputs):
        k = len(graphs)
        graphs.append({"hash": graph_hash(gm), "nodes": len(op_nodes(gm)), "compile_id": compat.current_compile_id()})
        forward = gm.forward

        def run(*args):
            ran.append(k)
            return forward(*args)
        return run

    out = []
    compat.dynamo_reset()
    try:
        with compat.recompile_limit_at_least(len(modules) + 2):
            for fqn, mod in modules.items():
                if fqn not in calls:
                    out.append({"fqn": fqn, "graphs": [], "compiles": [], "error": "not called by the model's step"})
                    continue
                args, kwargs = calls[fqn]
                g0, r0 = len(graphs), len(ran)
                before = {id(m) for m in compat.compilation_metrics()}
                error = None
                try:
                    torch.compile(mod, backend=backend)(*args, **kwargs)
                except Exception as exc:  # dynamo could not take the block alone: said for this instance
                    from graphtool.capture.bench.modes import describe_error

                    error = describe_error(exc)
                reasons = {str(m.compile_id): m.recompile_reason for m in compat.compilation_metrics() if id(m) not in before}
                compiles = [dict(g, recompile_reason=reasons.get(g["compile_id"])) for g in graphs[g0:]]
                out.append({"fqn": fqn, "graphs": [graphs[k]["hash"] for k in ran[r0:]], "compiles": compiles, "error": error,
                            "inputs": [_value(t) for t in iter_tensors((args, kwargs))]})
    finally:
        compat.dynamo_reset()
    return out


def module_facts(module: Any) -> dict:
    """What can tell two instances of one class apart: ``params`` (relative name -> ``f32[64, 16]``), ``attrs``
    (plain attributes of the module and its submodules: numbers, strings, flags) and ``reads`` (the attributes the
    class's ``forward`` reads as ``self.NAME``)."""
    params = {name: f"{str(p.dtype).removeprefix('torch.')}{list(p.shape)}"
              for name, p in module.named_parameters(recurse=True)}
    attrs = {}
    for prefix, mod in module.named_modules():
        for k, v in vars(mod).items():
            if k.startswith("_") or k == "training" or not isinstance(v, (bool, int, float, str)) or v is None:
                continue
            attrs[f"{prefix}.{k}" if prefix else k] = repr(v)
    return {"params": params, "attrs": attrs, "reads": sorted(_forward_reads(type(module)))}


def _forward_reads(cls) -> set[str]:
    try:
        source = inspect.getsource(inspect.unwrap(cls.forward))
    except (TypeError, OSError, AttributeError):
        return set()
    return set(re.findall(r"\bself\.([A-Za-z_]\w*)\b(?!\s*\()", source))


def is_compiled_module(module: Any) -> bool:
    """A module already under ``torch.compile`` (``module.compile()``, or an ``OptimizedModule``)."""
    return getattr(module, "_compiled_call_impl", None) is not None or type(module).__name__ == "OptimizedModule"
