"""The training step's peak, predicted: a live-bytes timeline through the AOT forward and backward graphs.

Each tensor a graph node makes is allocated when the node runs (rounded up to the caching allocator's 512-byte
blocks) and freed after its last use, as inductor's generated code frees it; views and ``getitem`` share their
base's block. Forward placeholders (parameters, inputs) are held by the caller and never freed there; the
backward's saved activations and tangents are freed after their last use; graph outputs live on (the forward's:
saved activations and the user's outputs; the backward's: gradients). A node's bytes are counted before its inputs
are freed, so the peak includes the op's inputs and outputs together.

The step's phases, as tests/truth/gpu/memory_truth.py measures them (the peak counter reset before each):

- forward: held (parameters, buffers, inputs, optimizer state from step 2) + the forward timeline's peak;
- backward: held + the user's outputs + the backward timeline's peak (saved activations, tangents, gradients);
- optimizer: held + gradients + the optimizer step's own peak (its temporaries; measured by running it).

This is an estimate at the ATen level: inductor fuses pointwise chains, so intermediates this timeline counts can
live in registers instead (docs/memory.md says where it over- or under-predicts, against the H200 rows).
:func:`walk` with ``fuse`` applies two of inductor's habits (:func:`fused_away`, and a pointwise kernel writing over
a dying input of its size); the reduce-overhead pool's simulation walks that way
(:mod:`graphtool.analysis.memory.pool_step`), the plain step does not (docs/memory.md: it did not help it).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from graphtool.capture.memory.live_bytes import BLOCK, rounded  # noqa: F401  (re-exported: the rounding rule)
from graphtool.capture.tensors import iter_tensors


def _bytes(val) -> int:
    from graphtool.analysis.memory.saved import _int

    total = 0
    for t in iter_tensors(val):
        try:
            total += rounded(_int(t.untyped_storage().nbytes()))
        except Exception:
            total += rounded(_int(t.numel()) * t.element_size())
    return total


def _storage(node):
    """A key equal for two nodes whose values share one storage, None when the value has none."""
    from graphtool.capture import compat

    val = node.meta.get("val")
    try:
        return compat.storage_key(val)
    except Exception:  # no tensor (a symbolic int, a token), or a tensor without storage
        return None


def _is_view(node) -> bool:
    if node.op != "call_function":
        return False
    if getattr(node.target, "__name__", "") == "getitem":
        return True
    schema = getattr(node.target, "_schema", None)
    return bool(schema is not None and schema.returns and all(a.alias_info is not None for a in schema.returns))


@dataclass(frozen=True)
class Timeline:
    """One graph's live bytes over what its caller holds: ``peak``, the node where it happened, what was live at the
    start (the backward's saved activations and tangents; ``tangents`` of them) and at the end (its outputs)."""

    start: int
    tangents: int
    peak: int
    peak_node: str | None
    end: int
    biggest: tuple = field(default_factory=tuple)  # (node name, bytes) of the largest tensors made, largest first
    series: tuple = field(default_factory=tuple)  # (node name, live bytes once it ran, before its inputs are freed)


@dataclass(frozen=True)
class Walk:
    """``gm``'s allocations and frees in order, as :func:`timeline` counts them. ``size`` maps each storage's root
    node to its bytes, ``root`` each node to its storage's root (a view to its base's); ``placeholders`` are the
    ones not held by the caller (live at the start); ``events`` are ``("alloc", node, root)`` and
    ``("free", node, root)``, a node's frees after its allocation; ``outputs`` (roots) are never freed."""

    size: dict
    root: dict
    placeholders: list
    events: list
    outputs: set


_REDUCTIONS = frozenset({"sum", "mean", "amax", "amin", "var", "var_mean", "std", "prod", "logsumexp",
                         "_softmax", "_log_softmax"})


def _op_name(node) -> str:
    return getattr(node.target, "__name__", "").split(".")[0]


#: filled tensors inductor lowers to a constant expression, computed where they are read
_CONSTANTS = frozenset({"full", "full_like", "zeros", "zeros_like", "ones", "ones_like", "scalar_tensor"})


def _pointwise(node) -> bool:
    import torch

    return node.op == "call_function" and (torch.Tag.pointwise in getattr(node.target, "tags", ())
                                           or _op_name(node) in _CONSTANTS)


#: foreach ops that reduce each tensor: not computed inside their readers' kernels
_FOREACH_REDUCTIONS = frozenset({"_foreach_norm", "_foreach_max"})


def _foreach_pointwise(node) -> bool:
    """A ``torch._foreach_*`` op that is pointwise tensor by tensor (an optimizer's ``_foreach_mul``, ``_foreach_sqrt``)."""
    name = _op_name(node)
    return node.op == "call_function" and name.startswith("_foreach_") and name not in _FOREACH_REDUCTIONS


def _writes_back(node) -> bool:
    """``copy_(input, value)``: a mutation of a graph input that AOT kept in the graph (an optimizer writing its
    parameters and state); inductor computes ``value`` in the kernel that writes the input."""
    return (node.op == "call_function" and _op_name(node) == "copy_" and bool(node.args)
            and getattr(node.args[0], "op", None) == "placeholder")


def _readers(node, write_back: bool = False) -> list:
    """What reads ``node``'s values, seen through views (a view of a lazily computed buffer stays lazy); with
    ``write_back``, a ``copy_`` into a graph input is a reader (a kernel), not a view."""
    out = []
    for u in node.users:
        if write_back and _writes_back(u):
            out.append(u)
        elif _is_view(u) and u.op == "call_function":
            out += _readers(u, write_back)
        else:
            out.append(u)
    return out


def fused_away(gm, *, optimizer: bool = False) -> set[str]:
    """Nodes inductor computes inside the kernels that read them instead of writing to memory: a pointwise op whose
    readers (through views) are all pointwise ops or reductions, that is not a graph output, and, read by more
    than one kernel, whose inlined expression reads at most 4 written buffers (inductor's
    ``realize_reads_threshold``; more and it writes the value once). Matmuls, convolutions, reductions, outputs
    and what a library kernel reads are written. A rule of thumb for inductor's lowering, not its scheduler:
    docs/memory.md says where it misses against the H200.

    ``optimizer``: ``gm`` is an optimizer's step compiled inside a training step, which inductor compiles into
    kernels that write the parameters and the state in place (AdamW's whole foreach step was one kernel, and no
    buffer, in its CPU output code): foreach ops are pointwise, the ``copy_`` writing a new value back into an
    input computes it, and a foreach op reads one tensor of each list per element, so no read limit applies."""
    out = next((n for n in gm.graph.nodes if n.op == "output"), None)
    returned = {a.name for a in out.all_input_nodes} if out is not None else set()
    gone: set[str] = set()
    reads: dict[str, frozenset] = {}  # a fused node's written inputs
    for n in gm.graph.nodes:
        ins = set()
        for a in n.all_input_nodes:
            base = a
            while _is_view(base) and base.op == "call_function" and base.all_input_nodes:
                base = base.all_input_nodes[0]
            ins |= reads[base.name] if base.name in gone else {base.name}
        if not (_pointwise(n) or (optimizer and _foreach_pointwise(n))) or n.name in returned:
            continue
        readers = _readers(n, write_back=optimizer)
        if not readers or any(r.op == "output" for r in readers):
            continue
        if not all(_pointwise(r) or (r.op == "call_function" and _op_name(r) in _REDUCTIONS)
                   or (optimizer and (_foreach_pointwise(r) or _writes_back(r))) for r in readers):
            continue
        if len(readers) > 1 and len(ins) > 4 and not optimizer:
            continue
        gone.add(n.name)
        reads[n.name] = frozenset(ins)
    return gone


def walk(gm, *, held: set[str], fuse: bool = False, optimizer: bool = False) -> Walk:
    """The :class:`Walk` of ``gm``; placeholders named in ``held`` are the caller's. With ``fuse``, the nodes of
    :func:`fused_away` (``optimizer``: as an optimizer's step fuses) make nothing, and what they read lives until
    the kernel that computes them runs."""
    nodes = list(gm.graph.nodes)
    gone = fused_away(gm, optimizer=optimizer) if fuse else set()
    index = {n.name: i for i, n in enumerate(nodes)}
    at: dict[str, int] = {}  # where a node's reads happen: its own index, or its reader's kernel's when fused
    lazy = set(gone)  # fused nodes and views of them: read where their readers' kernels run
    for n in nodes:
        if _is_view(n) and n.op == "call_function" and n.all_input_nodes and n.all_input_nodes[0].name in lazy:
            lazy.add(n.name)
    for n in reversed(nodes):
        at[n.name] = max((at[u.name] for u in n.users), default=index[n.name]) if n.name in lazy else index[n.name]
    root: dict[str, str] = {}
    size: dict[str, int] = {}
    last: dict[str, int] = {}
    outputs: set[str] = set()
    shared: dict = {}  # a storage -> the first placeholder over it, not the caller's
    for n in nodes:
        if n.op == "output":
            for a in n.all_input_nodes:
                outputs.add(root.get(a.name, a.name))
            continue
        key = _storage(n) if n.op == "placeholder" and n.name not in held else None
        if _is_view(n) and n.all_input_nodes:
            root[n.name] = root.get(n.all_input_nodes[0].name, n.all_input_nodes[0].name)
        elif key is not None and key in shared:
            # saved views of one storage (q, k and v split from one projection's output): one block, freed after
            # the last use of any of them
            root[n.name] = shared[key]
        else:
            if key is not None:
                shared[key] = n.name
            root[n.name] = n.name
            own = (n.op == "call_function" and n.name not in gone) or (n.op == "placeholder" and n.name not in held)
            size[n.name] = _bytes(n.meta.get("val")) if own else 0
        for a in n.all_input_nodes:
            r = root.get(a.name, a.name)
            last[r] = max(last.get(r, -1), at[n.name])
    placeholders = [n.name for n in nodes if n.op == "placeholder" and n.name not in held and root[n.name] == n.name]
    freeing: dict[int, list[str]] = {}
    for r, i in last.items():
        if r not in outputs and r in size and (r not in held) and r not in gone:
            freeing.setdefault(i, []).append(r)
    placeholder_set = set(placeholders)
    events: list[tuple[str, str, str]] = []
    for p in placeholders:  # an input nobody reads: freed at once
        if p not in last and p not in outputs:
            events.append(("free", p, p))
    for i, n in enumerate(nodes):
        if n.op == "call_function" and root[n.name] == n.name and n.name not in gone:
            dying = [r for r in freeing.get(i, ()) if size.get(r) == size[n.name] and not r.startswith("tangents_")
                     and r not in placeholder_set]
            if fuse and _pointwise(n) and dying:
                # inductor's inplace_buffers: the kernel writes over an input of its size that dies here
                events.append(("inplace", n.name, dying[0]))
                freeing[i].remove(dying[0])
            else:
                events.append(("alloc", n.name, n.name))
            if n.name not in last and n.name not in outputs:  # made and never read
                freeing.setdefault(i, []).append(n.name)
        events += [("free", n.name, r) for r in freeing.get(i, ())]
    return Walk(size, root, placeholders, events, outputs)


def timeline(gm, *, held: set[str], fuse: bool = False, optimizer: bool = False) -> Timeline:
    """Walk ``gm`` in order: allocate each node's tensors, free each after its last use unless it is an output.
    Placeholders named in ``held`` (parameters, inputs) belong to the caller: not counted, never freed; the others
    (saved activations, tangents) are live at the start and freed after their last use."""
    w = walk(gm, held=held, fuse=fuse, optimizer=optimizer)
    size, placeholders = w.size, w.placeholders
    live = sum(size[p] for p in placeholders)
    start = live
    tangents = sum(size[p] for p in placeholders if p.startswith("tangents_"))
    peak, peak_node = live, None
    made = []
    series = []
    for kind, node, r in w.events:
        if kind == "alloc":
            live += size[r]
            made.append((node, size[r]))
            series.append((node, live))
            if live > peak:
                peak, peak_node = live, node
        elif kind == "inplace":  # the node's value takes over its dying input's block: nothing new
            made.append((node, size[node]))
            series.append((node, live))
        else:
            live -= size.get(r, 0)
    made.sort(key=lambda x: -x[1])
    return Timeline(start, tangents, peak, peak_node, live, tuple(made[:3]), tuple(series))
