"""What training keeps in memory for backward: eager autograd's saved tensors beside the compiled ones.

Two columns, each a list of saved tensors (shape, dtype, bytes, the op that made it, the user's
line, the module whose forward made it):

- **eager**: what torch's autograd engine saves, recorded by ``saved_tensors_hooks`` on one eager
  forward (:mod:`graphtool.capture.memory.saved_tensors`);
- **compiled**: what the chosen backend's partitioner saves between its forward and backward graphs:
  every placeholder of each backward graph that is not a tangent, described by the forward node
  that makes it. Backward calls the partitioner copied from the forward are what the compiled
  version recomputes instead of saving (``torch.utils.checkpoint`` regions among them).

**How bytes are counted.** A storage counts once, whole: a saved view of another saved tensor (or
of a parameter) adds nothing, and a saved slice holds its whole storage. Each tensor has its own
``bytes`` (elements x element size) and ``counted_bytes``: the storage's bytes on the first
tensor saved over that storage, 0 on the others (``shares_storage_with`` names that first one).
Totals are sums of ``counted_bytes``; saved parameters, buffers and inputs are listed apart from
activations, since they are held whether or not backward needs them.

Example::

    >>> from graphtool.capture.user.script import load_model
    >>> from graphtool.capture.memory.saved_tensors import capture_saved
    >>> from graphtool.capture.tracer import trace_model
    >>> spec = load_model("examples/mlp.py")
    >>> report = build_memory_report(capture_saved(spec), trace_model(spec))
    >>> report.eager.by_kind["activation"], report.compiled.by_kind["activation"]
    ((2048, 2), (2048, 1))
"""

from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass, field

from graphtool.analysis.graph_summary import Source, op_name, placeholder_roles, user_source
from graphtool.analysis.module_names import module_fqn
from graphtool.capture import compat

SCHEMA_VERSION = 1
KINDS = ("activation", "parameter", "buffer", "input")
BY = ("line", "module", "op")

COUNTING = (
    "each storage counts once, whole: a saved view of another saved tensor or of a parameter adds "
    "nothing, a saved slice holds its whole storage; totals sum counted_bytes"
)

#: a forward placeholder's kind -> the kind of a saved tensor over its storage
_ROLE_KIND = {"parameter": "parameter", "buffer": "buffer", "user_input": "input"}


@dataclass(frozen=True)
class SavedTensor:
    """One saved tensor. ``name``: the backward graph's placeholder (compiled) or ``#N`` in save order (eager)."""

    index: int
    name: str
    region: int | None
    kind: str  # activation | parameter | buffer | input
    of: str | None  # the parameter's or buffer's FQN, the input's argument name
    shape: tuple
    dtype: str
    bytes: int
    storage: int
    counted_bytes: int
    shares_storage_with: int | None
    op: str | None
    source: Source | None
    module: str | None
    checkpoint: bool = False
    formula: str | None = None  # bytes of the tensor as a formula of the symbolic sizes (--dynamic)

    def to_dict(self) -> dict:
        return {
            "index": self.index, "name": self.name, "region": self.region, "kind": self.kind, "of": self.of,
            "shape": list(self.shape), "dtype": self.dtype, "bytes": self.bytes, "storage": self.storage,
            "counted_bytes": self.counted_bytes, "shares_storage_with": self.shares_storage_with, "op": self.op,
            "source": self.source.to_dict() if self.source else None, "module": self.module,
            "checkpoint": self.checkpoint, "formula": self.formula,
        }


@dataclass(frozen=True)
class Side:
    """One column: every saved tensor, and its totals (storages counted once)."""

    name: str  # eager | compiled
    tensors: tuple[SavedTensor, ...]
    bytes: int  # every storage once
    tensor_bytes: int  # every tensor's own bytes, views and repeats included
    storages: int
    by_kind: dict[str, tuple[int, int]]  # kind -> (counted bytes, tensors)
    formula: str | None = None  # activation bytes as a formula (--dynamic)

    def to_dict(self) -> dict:
        return {
            "bytes": self.bytes, "tensor_bytes": self.tensor_bytes, "storages": self.storages,
            "by_kind": {k: {"bytes": b, "tensors": n} for k, (b, n) in self.by_kind.items()},
            "activation_formula": self.formula,
            "tensors": [t.to_dict() for t in self.tensors],
        }


@dataclass(frozen=True)
class RegionTotal:
    region: int
    tensors: int
    bytes: int
    activation_bytes: int
    recomputed: int

    def to_dict(self) -> dict:
        return {"region": self.region, "tensors": self.tensors, "bytes": self.bytes,
                "activation_bytes": self.activation_bytes, "recomputed_ops": self.recomputed}


@dataclass(frozen=True)
class Recomputed:
    """A forward op the compiled backward runs again instead of saving its result."""

    region: int | None
    name: str | None  # the backward graph's node (compiled); None for eager
    op: str
    source: Source | None
    module: str | None
    checkpoint: str | None  # the torch.utils.checkpoint policy (compiled), "checkpoint" (eager), else None
    view: bool = False  # a view: recomputing it costs nothing

    def to_dict(self) -> dict:
        return {"region": self.region, "name": self.name, "op": self.op,
                "source": self.source.to_dict() if self.source else None, "module": self.module,
                "checkpoint": self.checkpoint, "view": self.view}


@dataclass(frozen=True)
class Group:
    """Activation bytes of one line, module or op, both columns."""

    key: str
    source: Source | None
    eager_bytes: int
    eager_tensors: int
    compiled_bytes: int
    compiled_tensors: int

    def to_dict(self) -> dict:
        return {"key": self.key, "source": self.source.to_dict() if self.source else None,
                "eager": {"bytes": self.eager_bytes, "tensors": self.eager_tensors},
                "compiled": {"bytes": self.compiled_bytes, "tensors": self.compiled_tensors}}


@dataclass(frozen=True)
class Held:
    """Parameters, their gradients, or buffers: count and bytes."""

    tensors: int
    bytes: int

    def to_dict(self) -> dict:
        return {"tensors": self.tensors, "bytes": self.bytes}


@dataclass(frozen=True)
class MemoryReport:
    backend: str
    device: str
    training: bool
    parameters: Held
    gradients: Held
    buffers: Held
    eager: Side
    compiled: Side
    regions: tuple[RegionTotal, ...]
    recomputed: tuple[Recomputed, ...]
    eager_recomputed: tuple[Recomputed, ...]
    by: str
    depth: int | None
    groups: tuple[Group, ...]
    top_lines: tuple[Group, ...]
    counting: str = COUNTING
    symbols: dict = field(default_factory=dict)  # --dynamic: size symbol -> the input size it stands for
    notes: tuple[str, ...] = ()
    eager_not_measured: str | None = None  # why the eager column is empty (torch.cond under graphtool's recording)

    def verdict(self) -> str:
        if not self.training:
            return "no backward: nothing is saved for it (no parameter or input requires grad)"
        e, c = self.eager.by_kind["activation"][0], self.compiled.by_kind["activation"][0]
        if self.eager_not_measured:
            return f"activations saved for backward: compiled ({self.backend}) {format_bytes(c)}; eager not measured"
        text = f"activations saved for backward: eager {format_bytes(e)}, compiled ({self.backend}) {format_bytes(c)}"
        if e:
            text += f" ({c / e:.0%} of eager)"
        return text

    def to_dict(self) -> dict:
        return {
            "schema_version": SCHEMA_VERSION,
            "backend": self.backend,
            "device": self.device,
            "training": self.training,
            "counting": self.counting,
            "parameters": self.parameters.to_dict(),
            "gradients": self.gradients.to_dict(),
            "buffers": self.buffers.to_dict(),
            "eager": self.eager.to_dict(),
            "compiled": self.compiled.to_dict(),
            "regions": [r.to_dict() for r in self.regions],
            "recomputed": [r.to_dict() for r in self.recomputed],
            "eager_recomputed": [r.to_dict() for r in self.eager_recomputed],
            "by": self.by,
            "depth": self.depth,
            "groups": [g.to_dict() for g in self.groups],
            "top_lines": [g.to_dict() for g in self.top_lines],
            "symbols": dict(self.symbols),
            "notes": list(self.notes),
            "eager_not_measured": self.eager_not_measured,
        }


def symbol_source(text: str) -> str:
    """dynamo's name for the input size a symbol stands for, as the user writes it.

    >>> symbol_source("L['input_ids'].size()[1]"), symbol_source("L['self'].cache.size()[0]")
    ('input_ids.size(1)', 'self.cache.size(0)')
    """
    text = re.sub(r"L\['([^']*)'\]", r"\1", text)
    return re.sub(r"\.size\(\)\[(\d+)\]", r".size(\1)", text)


def format_bytes(n) -> str:
    """``1536`` -> ``1.5 KiB``.

    >>> format_bytes(0), format_bytes(1023), format_bytes(2048), format_bytes(3 * 2**30)
    ('0 B', '1023 B', '2.0 KiB', '3.0 GiB')
    """
    n = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(n) < 1024 or unit == "GiB":
            return f"{int(n)} B" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GiB"


# ---------------------------------------------------------------- module names


def module_at_depth(fqn: str | None, depth: int | None) -> str | None:
    """The first ``depth`` levels of a module FQN; a list index counts with its list.

    >>> module_at_depth("model.layers.3.self_attn.q_proj", 2), module_at_depth("model.norm", 5)
    ('model.layers.3', 'model.norm')
    """
    if fqn is None or depth is None or not fqn:
        return fqn
    levels: list[str] = []
    for part in fqn.split("."):
        if part.isdigit() and levels:
            levels[-1] += "." + part
        else:
            levels.append(part)
    return ".".join(levels[:depth])


def _node_module(node) -> str | None:
    stack = node.meta.get("nn_module_stack")
    if not stack:
        return "" if node.meta.get("stack_trace") else None
    return module_fqn(list(stack.values())[-1][0])


# ---------------------------------------------------------------- eager


def _count(tensors: list[dict]) -> list[SavedTensor]:
    """Give each tensor its counted bytes: a storage's bytes on its first tensor, 0 on the rest."""
    first: dict = {}  # storage key -> (its number, the index of its first tensor)
    out = []
    for t in tensors:
        key = t.pop("storage_key")
        storage_bytes = t.pop("storage_bytes")
        if key in first:
            t.update(counted_bytes=0, shares_storage_with=first[key][1])
        else:
            first[key] = (len(first), t["index"])
            t.update(counted_bytes=storage_bytes, shares_storage_with=None)
        t["storage"] = first[key][0]
        out.append(SavedTensor(**t))
    return out


def eager_side(eager) -> Side:
    tensors = [
        dict(index=s.index, name=f"#{s.index}", region=None, kind=s.kind, of=s.name, shape=s.shape, dtype=s.dtype,
             bytes=s.tensor_bytes, storage_key=s.storage, storage_bytes=s.storage_bytes, op=s.op,
             source=Source(*s.source) if s.source else None, module=s.module, checkpoint=s.checkpointed)
        for s in eager.saved
    ]
    return side_of("eager", _count(tensors))


def side_of(name: str, tensors: list[SavedTensor], formula: str | None = None) -> Side:
    """A column and its totals, from its tensors (their ``counted_bytes`` already set)."""
    by_kind = {k: (0, 0) for k in KINDS}
    for t in tensors:
        b, n = by_kind.get(t.kind, (0, 0))
        by_kind[t.kind] = (b + t.counted_bytes, n + 1)
    return Side(
        name=name,
        tensors=tuple(tensors),
        bytes=sum(t.counted_bytes for t in tensors),
        tensor_bytes=sum(t.bytes for t in tensors),
        storages=sum(1 for t in tensors if t.shares_storage_with is None),
        by_kind=by_kind,
        formula=formula,
    )


# ---------------------------------------------------------------- compiled


def _is_tensor(val) -> bool:
    return val is not None and hasattr(val, "untyped_storage") and hasattr(val, "shape")


def _int(value) -> int:
    """An int, or a symbolic size's hint (its value for the example inputs). Never ``int()`` on a
    SymInt: that would specialize the symbol to the example's value in the trace's ShapeEnv."""
    if isinstance(value, int):
        return value
    hint = getattr(getattr(value, "node", None), "hint", None)
    return int(hint) if hint is not None else 0


def _dims(val) -> tuple:
    return tuple(int(s) if str(s).lstrip("-").isdigit() else str(s) for s in val.shape)


def _symbolic(value) -> bool:
    return not str(value).lstrip("-").isdigit()


def _producer_op(node) -> str | None:
    if node.op == "placeholder":
        return None
    if node.op == "call_function" and getattr(node.target, "__name__", "") == "getitem" and node.args:
        parent = node.args[0]
        if hasattr(parent, "op"):
            return f"{op_name(parent)}[{node.args[1]}]"
    return op_name(node)


def _storage_bytes(val) -> tuple[int, str | None]:
    try:
        raw = val.untyped_storage().nbytes()
    except Exception:
        raw = val.numel() * val.element_size()
    return _int(raw), (str(raw) if _symbolic(raw) else None)


def _input_sizes(forward, roles: dict) -> dict[str, str]:
    """Size symbol -> the named input dimension it is (``{"s13": "input_ids.size(1)"}``), read off the
    graph's inputs: dynamo's own record of a symbol's source can name the frame's ``args[1]`` instead."""
    found: dict[str, str] = {}
    for node in forward.graph.nodes:
        role = roles.get(node.name)
        val = node.meta.get("val")
        if node.op != "placeholder" or role is None or role.kind not in _ROLE_KIND or not _is_tensor(val):
            continue
        for dim, size in enumerate(val.shape):
            if str(size).isidentifier():  # the bare symbol, not an expression of it (s0 + 1)
                found.setdefault(str(size), f"{role.name}.size({dim})")
    return found


def _compiled_region(region, counter: int) -> tuple[list[dict], list[Recomputed], dict]:
    forward_nodes = {n.name: n for n in region.forward.graph.nodes}
    roles = {p.graph_name: p for p in placeholder_roles(region.forward, region, "forward")}
    owners: dict = {}
    for node in region.forward.graph.nodes:
        if node.op == "placeholder" and _is_tensor(node.meta.get("val")):
            role = roles.get(node.name)
            kind = _ROLE_KIND.get(role.kind, "activation") if role else "activation"
            owners.setdefault(compat.storage_key(node.meta["val"]), (kind, role.name if role and kind != "activation" else None))
    tensors, symbols = [], {}
    sizes = _input_sizes(region.forward, roles)
    backward_placeholders = {n.name: n for n in region.backward.graph.nodes if n.op == "placeholder"}
    for ph in placeholder_roles(region.backward, region, "backward"):
        if ph.kind == "tangent":
            continue
        node = forward_nodes.get(ph.graph_name, backward_placeholders[ph.graph_name])
        val = node.meta.get("val")
        if not _is_tensor(val):
            continue  # a saved size (SymInt): no storage
        key = compat.storage_key(val)
        kind, of = owners.get(key, ("activation", None))
        storage_bytes, _ = _storage_bytes(val)
        numel = val.numel() * val.element_size()
        formula = str(numel) if _symbolic(numel) else None
        if formula:
            for sym, source in compat.symbol_sources(val).items():
                symbols.setdefault(sym, sizes.get(sym, source))
            symbols.update({sym: name for sym, name in sizes.items() if sym not in symbols and re.search(rf"\b{sym}\b", formula)})
        tensors.append(dict(
            index=counter + len(tensors), name=ph.graph_name, region=region.index, kind=kind, of=of, shape=_dims(val),
            dtype=str(val.dtype).replace("torch.", ""), bytes=_int(numel), storage_key=(region.index, key),
            storage_bytes=storage_bytes, op=_producer_op(node), source=user_source(node.meta.get("stack_trace")),
            module=_node_module(node) if node.op != "placeholder" else None,
            checkpoint=compat.checkpoint_policy(node) is not None, formula=formula,
        ))
    recomputed = []
    for node in region.backward.graph.nodes:
        if node.op != "call_function" or compat.partitioner_tag(node) != "is_forward":
            continue
        target = getattr(node.target, "_schema", None)
        view = bool(target is not None and any(a.alias_info is not None and not a.alias_info.is_write
                                                for a in target.returns))
        recomputed.append(Recomputed(region.index, node.name, _producer_op(node), user_source(node.meta.get("stack_trace")),
                                     _node_module(node), compat.checkpoint_policy(node), view))
    return tensors, recomputed, symbols


def compiled_side(capture) -> tuple[Side, tuple[RegionTotal, ...], tuple[Recomputed, ...], dict]:
    dicts: list[dict] = []
    recomputed: list[Recomputed] = []
    symbols: dict = {}
    per_region = []
    for region in capture.regions:
        if region.backward is None or region.forward is None:
            continue
        tensors, again, syms = _compiled_region(region, len(dicts))
        dicts.extend(tensors)
        recomputed.extend(again)
        symbols.update(syms)
        per_region.append((region.index, len(tensors), len(again)))
    tensors = _count(dicts)
    totals = []
    for index, n, again in per_region:
        mine = [t for t in tensors if t.region == index]
        totals.append(RegionTotal(index, n, sum(t.counted_bytes for t in mine),
                                  sum(t.counted_bytes for t in mine if t.kind == "activation"), again))
    formula = _activation_formula(tensors) if symbols else None
    return side_of("compiled", tensors, formula), tuple(totals), tuple(recomputed), symbols


def _activation_formula(tensors: list[SavedTensor]) -> str | None:
    """Sum of the counted activations' bytes, as one simplified formula of the size symbols."""
    try:
        import sympy
    except ImportError:  # pragma: no cover - sympy ships with torch
        return None
    total = sympy.Integer(0)
    for t in tensors:
        if t.kind == "activation" and t.counted_bytes:
            total += sympy.sympify(t.formula) if t.formula else sympy.Integer(t.bytes)
    return str(sympy.factor(total))


# ---------------------------------------------------------------- grouping


def _group_key(t: SavedTensor, by: str, depth: int | None) -> tuple[str, Source | None]:
    if by == "line":
        return (str(t.source) if t.source else "(no line)"), t.source
    if by == "module":
        fqn = module_at_depth(t.module, depth)
        return ("(model)" if fqn == "" else fqn if fqn is not None else "(no module)"), None
    return t.op or "(no op)", None


def group(eager: Side, compiled: Side, by: str, depth: int | None = None) -> tuple[Group, ...]:
    """Activation bytes per line, module (to ``depth``) or op, both columns, largest first."""
    acc: dict[str, list] = {}
    for col, side in ((0, eager), (1, compiled)):
        for t in side.tensors:
            if t.kind != "activation":
                continue
            key, source = _group_key(t, by, depth)
            row = acc.setdefault(key, [source, 0, 0, 0, 0])
            row[1 + 2 * col] += t.counted_bytes
            row[2 + 2 * col] += 1
    groups = [Group(k, v[0], v[1], v[2], v[3], v[4]) for k, v in acc.items()]
    groups.sort(key=lambda g: (-max(g.eager_bytes, g.compiled_bytes), g.key))
    return tuple(groups)


def _eager_recomputed(eager) -> tuple[Recomputed, ...]:
    """The user's ops that ran inside ``torch.utils.checkpoint``. Ops with neither a user line nor a
    module are checkpoint's own bookkeeping (torch 2.11/2.12 allocate with ``aten.empty`` there), not
    work the user's model recomputes."""
    return tuple(Recomputed(None, None, o.op, Source(*o.source) if o.source else None, o.module, "checkpoint")
                 for o in eager.checkpointed if o.source or o.module)


def recomputed_by_line(recomputed) -> list[tuple[Source | None, int, int, str | None]]:
    """``(line, ops, views among them, checkpoint policy)`` for each line with recomputed ops, most ops first."""
    acc: dict = defaultdict(lambda: [0, 0, None])
    for r in recomputed:
        row = acc[r.source]
        row[0] += 1
        row[1] += r.view
        row[2] = row[2] or r.checkpoint
    rows = [(src, n, views, ckpt) for src, (n, views, ckpt) in acc.items()]
    return sorted(rows, key=lambda r: -r[1])


# ---------------------------------------------------------------- the report


def build_memory_report(eager, capture, *, by: str = "line", depth: int | None = None, top: int = 10,
                        notes: tuple[str, ...] = ()) -> MemoryReport:
    """Both columns from an :class:`~graphtool.capture.memory.saved_tensors.EagerCapture` and a
    :class:`~graphtool.capture.tracer.Capture` of the same model."""
    if by not in BY:
        raise ValueError(f"by must be one of {BY}, not {by!r}")
    e = eager_side(eager)
    c, regions, recomputed, symbols = compiled_side(capture)
    params = [p for p in eager.parameters]
    grads = [p for p in params if p.requires_grad]
    extra = list(notes) + list(getattr(eager, "notes", ()) or ())
    from graphtool.capture import compat

    for i, r in enumerate(capture.regions):
        budget = compat.region_budget_of(r.forward) if r.forward is not None and r.backward is not None else None
        if budget is not None:
            extra.append(f"compiled: region {i} is partitioned at its own activation budget {budget:g} "
                         "(torch.autograd.graph.region_activation_memory_budget), over "
                         "torch._functorch.config.activation_memory_budget")
    if capture.training and not any(r.backward is not None for r in capture.regions):
        extra.append("no compiled region has a backward graph")
    if getattr(capture, "stopped", None):
        extra.append(capture.stopped)
    unmeasured = getattr(eager, "not_measured", None)
    if unmeasured:
        extra.insert(0, f"eager: not measured: {unmeasured}; the compiled column is what torch.compile's graphs save")
    if eager.device == "meta" and any((t.op or "").startswith("aten._safe_softmax") for t in e.tensors):
        extra.append("on meta, scaled_dot_product_attention takes its math path and saves the attention matrix "
                     "(batch x heads x query x key); on a GPU its flash or memory-efficient kernel saves only "
                     "its output and logsumexp")
    return MemoryReport(
        backend=capture.backend,
        device=eager.device,
        training=bool(capture.training or eager.training),
        parameters=Held(len(params), sum(p.storage_bytes for p in params)),
        gradients=Held(len(grads), sum(p.nbytes for p in grads)),
        buffers=Held(len(eager.buffers), sum(b.storage_bytes for b in eager.buffers)),
        eager=e,
        compiled=c,
        regions=regions,
        recomputed=recomputed,
        eager_recomputed=_eager_recomputed(eager),
        by=by,
        depth=depth,
        groups=group(e, c, by, depth),
        top_lines=group(e, c, "line")[:top],
        symbols={k: symbol_source(v) for k, v in symbols.items()},
        notes=tuple(extra),
        eager_not_measured=unmeasured,
    )
