"""What AOT autograd knows about a region's inputs and outputs, decoded once into plain records.

The tracer builds these inside the forward compiler, from AOT's placeholder descriptors and its
ViewAndMutationMeta (through :mod:`graphtool.capture.compat`, which alone knows the private field
names). Analyses read the records, never torch's objects.

Example::

    >>> ref = InputRef("buffer", "bn.running_mean", "bn.running_mean")
    >>> rec = InputRecord(0, "arg0_1", "plain", ref, mutates_data=True)
    >>> rec.mutation_kinds, rec.mutated
    (('data',), True)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional


@dataclass(frozen=True)
class InputRef:
    """What one dynamo graph input is, found by identity against the model's own tensors."""

    kind: str  # parameter | buffer | user_input | intermediate | other
    name: str  # FQN, forward argument name, or dynamo's placeholder name
    target: Optional[str]  # the FQN for parameters and buffers


@dataclass(frozen=True)
class InputRecord:
    """One placeholder of a region's forward (or inference) graph."""

    position: int  # the placeholder's position in the graph
    graph_name: str  # the placeholder's name in the graph ("primals_1", "arg0_1")
    role: str  # plain (a dynamo input) | view_base (AOT's synthetic base of aliased inputs) | attribute | token | tangent | unknown
    ref: Optional[InputRef]  # the dynamo input it stands for; for view_base, the input it is the base of
    mutates_data: bool = False
    mutates_metadata: bool = False
    mutates_storage: bool = False
    under_no_grad: bool = False  # every mutation of it happened under no_grad / inference mode
    static: bool = False  # in AOT's static_input_indices (parameters, buffers, mark_static_address)

    @property
    def mutation_kinds(self) -> tuple[str, ...]:
        return tuple(k for k, on in (("data", self.mutates_data), ("metadata", self.mutates_metadata),
                                     ("storage", self.mutates_storage)) if on)

    @property
    def mutated(self) -> bool:
        return bool(self.mutation_kinds)


@dataclass(frozen=True)
class OutputRecord:
    """One user output of a region, as AOT classified it."""

    index: int
    alias_type: str  # AOT's OutputType name: non_alias, alias_of_input, is_input, alias_of_intermediate...
    base_index: Optional[int]  # the input (or output) it aliases, when it does


def decode_forward(gm: Any, meta: Any, inputs: list[InputRef],
                   attributes: dict[str, InputRef] | None = None) -> tuple[tuple[InputRecord, ...], tuple[OutputRecord, ...]]:
    """Records for ``gm``'s placeholders and ``meta``'s user outputs; ``inputs`` are dynamo's graph inputs,
    ``attributes`` the tensors dynamo's graph holds as attributes (a compiled optimizer's parameters and
    state), by attribute name: AOT lifts those as inputs too (role ``attribute``)."""
    from graphtool.capture import compat

    flags = compat.input_mutation_flags(meta) if meta is not None else []
    static = compat.static_input_indices(meta) if meta is not None else set()
    records = []
    aot_index = 0  # AOT's metadata counts its inputs; effect tokens and rng seeds come before or after them
    for pos, node in enumerate(n for n in gm.graph.nodes if n.op == "placeholder"):
        desc = compat.node_descriptor(node)
        role, idx = compat.describe_aot_input(desc) if desc is not None else ("plain", pos)
        ref = inputs[idx] if role in ("plain", "view_base") and idx is not None and idx < len(inputs) else None
        target = compat.aot_input_attribute(desc) if role == "unknown" and desc is not None else None
        if target is not None and attributes and target in attributes:
            role, ref = "attribute", attributes[target]
        if role == "token":
            records.append(InputRecord(pos, node.name, role, None))
            continue
        f = flags[aot_index] if aot_index < len(flags) else {}
        records.append(InputRecord(pos, node.name, role, ref, static=aot_index in static, **f))
        aot_index += 1
    outputs = tuple(OutputRecord(i, kind, base) for i, (kind, base) in enumerate(compat.output_aliasing(meta))) if meta is not None else ()
    return tuple(records), outputs
