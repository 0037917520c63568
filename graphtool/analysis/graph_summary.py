"""Summaries of AOT graphs as plain values: placeholders named, outputs classified, ops counted.

Example::

    >>> from graphtool.capture.user.script import load_model
    >>> from graphtool.capture.tracer import trace_model
    >>> region = trace_model(load_model("examples/mlp.py")).regions[0]
    >>> g = summarize_graph(region.forward, "forward", region)
    >>> [(p.name, p.kind) for p in g.placeholders][:2]
    [('fc1.weight', 'parameter'), ('fc1.bias', 'parameter')]
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import asdict, dataclass

from graphtool.capture import compat

_FRAME = re.compile(r'File "(?P<file>[^"]+)", line (?P<line>\d+), in (?P<func>\S+)')
_TORCH_DIR = "/site-packages/torch/"


@dataclass(frozen=True)
class Source:
    file: str
    line: int

    def to_dict(self) -> dict:
        return {"file": self.file, "line": self.line}

    def __str__(self) -> str:
        return f"{self.file}:{self.line}"


@dataclass(frozen=True)
class Placeholder:
    name: str  # FQN, argument name, "tangent of output 0", or the graph's own name
    kind: str  # parameter | buffer | user_input | intermediate | tangent | saved | other
    target: str | None
    graph_name: str
    shape: tuple | None
    dtype: str | None
    device: str | None

    def to_dict(self) -> dict:
        d = asdict(self)
        d["shape"] = list(self.shape) if self.shape is not None else None
        return d


@dataclass(frozen=True)
class Output:
    index: int
    kind: str  # user_output | mutated_input | saved_for_backward | intermediate_base | gradient | none
    name: str | None  # the input it writes back to / is the gradient of

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class OpNode:
    name: str
    op: str
    device: str | None
    source: Source | None

    def to_dict(self) -> dict:
        return {
            "name": self.name,
            "op": self.op,
            "device": self.device,
            "source": self.source.to_dict() if self.source else None,
        }


@dataclass(frozen=True)
class GraphSummary:
    kind: str  # forward | backward
    nodes: int
    ops: dict[str, int]
    placeholders: tuple[Placeholder, ...]
    outputs: tuple[Output, ...]
    op_nodes: tuple[OpNode, ...]

    def to_dict(self) -> dict:
        return {
            "nodes": self.nodes,
            "ops": dict(self.ops),
            "placeholders": [p.to_dict() for p in self.placeholders],
            "outputs": [o.to_dict() for o in self.outputs],
            "op_nodes": [n.to_dict() for n in self.op_nodes],
        }


def op_name(node) -> str:
    """``aten.addmm.default`` for aten ops, the function name for Python callables."""
    target = node.target
    if node.op == "call_function":
        if hasattr(target, "_schema"):
            return str(target)
        return compat.higher_order_op_name(target) or getattr(target, "__name__", str(target))
    return f"{node.op}:{target}"


def user_source(stack_trace: str | None) -> Source | None:
    """The innermost frame of a node's stack trace that is outside torch itself.

    >>> user_source('  File "/m.py", line 9, in forward\\n    x = f(x)\\n')
    Source(file='/m.py', line=9)
    """
    if not stack_trace:
        return None
    frames = [m for m in _FRAME.finditer(stack_trace) if _TORCH_DIR not in m.group("file").replace("\\", "/")]
    if not frames:
        return None
    last = frames[-1]
    return Source(last.group("file"), int(last.group("line")))


def tensor_meta(node) -> tuple[tuple | None, str | None, str | None]:
    val = node.meta.get("val")
    if val is None or not hasattr(val, "shape"):
        return None, None, None
    shape = tuple(int(s) if str(s).lstrip("-").isdigit() else str(s) for s in val.shape)
    return shape, str(val.dtype).replace("torch.", ""), str(val.device)


def node_device(node) -> str | None:
    val = node.meta.get("val")
    if isinstance(val, (list, tuple)):
        val = next((v for v in val if hasattr(v, "device")), None)
    return str(val.device) if hasattr(val, "device") else None


def placeholder_roles(gm, region, graph_kind: str) -> list[Placeholder]:
    """Name every placeholder of an AOT graph through its descriptor and the region's inputs."""
    result = []
    nodes = [n for n in gm.graph.nodes if n.op == "placeholder"]
    for pos, node in enumerate(nodes):
        desc = compat.node_descriptor(node)
        role, idx = compat.describe_aot_input(desc) if desc is not None else _fallback_role(node, pos, graph_kind)
        shape, dtype, device = tensor_meta(node)
        if role in ("plain", "view_base") and idx is not None and idx < len(region.inputs):
            ref = region.inputs[idx]
            name = ref.name if role == "plain" else f"base of {ref.name}"
            kind, target = ref.kind, ref.target
        elif role == "tangent":
            name = f"tangent of output {idx}" if idx is not None else node.name
            kind, target = "tangent", None
        elif role == "unknown" and compat.aot_input_attribute(desc) in getattr(region, "attributes", {}):
            ref = region.attributes[compat.aot_input_attribute(desc)]  # a compiled optimizer's parameter or state
            name, kind, target = ref.name, ref.kind, ref.target
        elif graph_kind == "backward":
            name, kind, target = node.name, "saved", None
        else:
            name, kind, target = node.name, "other", None
        result.append(Placeholder(name, kind, target, node.name, shape, dtype, device))
    return result


def _fallback_role(node, pos: int, graph_kind: str) -> tuple[str, int | None]:
    # torch without AOT descriptors: forward placeholders follow dynamo's inputs in order.
    if graph_kind == "forward":
        return "plain", pos
    if node.name.startswith("tangents_"):
        return "tangent", None
    if node.name.startswith("primals_"):
        return "plain", int(node.name.split("_")[1]) - 1
    return "unknown", None


def output_roles(gm, region) -> list[Output]:
    descs = compat.output_descriptors(gm.graph) or []
    out = []
    for i, desc in enumerate(descs):
        role, detail = compat.describe_aot_output(desc)
        name = None
        if role in ("mutated_input", "gradient") and detail is not None and detail < len(region.inputs):
            name = region.inputs[detail].name
        out.append(Output(i, role, name))
    return out


def summarize_graph(gm, graph_kind: str, region) -> GraphSummary:
    ops: Counter[str] = Counter()
    op_nodes = []
    for node in gm.graph.nodes:
        if node.op in ("placeholder", "output", "get_attr"):
            continue
        name = op_name(node)
        ops[name] += 1
        op_nodes.append(OpNode(node.name, name, node_device(node), user_source(node.meta.get("stack_trace"))))
    return GraphSummary(
        kind=graph_kind,
        nodes=len(gm.graph.nodes),
        ops=dict(sorted(ops.items(), key=lambda kv: (-kv[1], kv[0]))),
        placeholders=tuple(placeholder_roles(gm, region, graph_kind)),
        outputs=tuple(output_roles(gm, region)),
        op_nodes=tuple(op_nodes),
    )
