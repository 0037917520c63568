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


def timeline(gm, *, held: set[str]) -> Timeline:
    """Walk ``gm`` in order: allocate each node's tensors, free each after its last use unless it is an output.
    Placeholders named in ``held`` (parameters, inputs) belong to the caller: not counted, never freed; the others
    (saved activations, tangents) are live at the start and freed after their last use."""
    nodes = list(gm.graph.nodes)
    root: dict[str, str] = {}
    size: dict[str, int] = {}
    last: dict[str, int] = {}
    outputs: set[str] = set()
    for i, n in enumerate(nodes):
        if n.op == "output":
            for a in n.all_input_nodes:
                outputs.add(root.get(a.name, a.name))
            continue
        if _is_view(n) and n.all_input_nodes:
            root[n.name] = root.get(n.all_input_nodes[0].name, n.all_input_nodes[0].name)
        else:
            root[n.name] = n.name
            own = n.op == "call_function" or (n.op == "placeholder" and n.name not in held)
            size[n.name] = _bytes(n.meta.get("val")) if own else 0
        for a in n.all_input_nodes:
            r = root.get(a.name, a.name)
            last[r] = max(last.get(r, -1), i)
    placeholders = [n.name for n in nodes if n.op == "placeholder" and n.name not in held]
    live = sum(size[p] for p in placeholders)
    start = live
    tangents = sum(size[p] for p in placeholders if p.startswith("tangents_"))
    peak, peak_node = live, None
    freeing: dict[int, list[str]] = {}
    for r, i in last.items():
        if r not in outputs and r in size and (r not in held):
            freeing.setdefault(i, []).append(r)
    for p in placeholders:  # an input nobody reads: freed at once
        if p not in last and p not in outputs:
            live -= size[p]
    made = []
    series = []
    for i, n in enumerate(nodes):
        if n.op == "call_function" and root[n.name] == n.name:
            live += size[n.name]
            made.append((n.name, size[n.name]))
            series.append((n.name, live))
            if n.name not in last and n.name not in outputs:  # made and never read
                freeing.setdefault(i, []).append(n.name)
        if live > peak:
            peak, peak_node = live, n.name
        for r in freeing.get(i, ()):
            live -= size.get(r, 0)
    made.sort(key=lambda x: -x[1])
    return Timeline(start, tangents, peak, peak_node, live, tuple(made[:3]), tuple(series))
