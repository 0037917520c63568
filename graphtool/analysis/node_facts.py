"""What the HTML report shows when a node is clicked, and which folded box holds a node.

Facts are plain dicts of plain values (JSON goes straight into the page): the op, shape, dtype and
device, the user's file:line, the module path, and the saved tensors that tie forward to backward
(AOT's partitioner names a backward's saved input after the forward node that produced it).

Example::

    >>> from graphtool.capture.user.script import load_model
    >>> from graphtool.capture.tracer import trace_model
    >>> region = trace_model(load_model("examples/mlp.py")).regions[0]
    >>> facts = graph_facts(region.forward, "forward", region)
    >>> facts["primals_1"]["name"], facts["primals_1"]["kind"]
    ('fc1.weight', 'parameter')
"""

from __future__ import annotations

import linecache

from graphtool.analysis.drawing import Drawing, collapse_with_members
from graphtool.analysis.graph_summary import op_name, output_roles, placeholder_roles, tensor_meta, user_source
from graphtool.analysis.module_names import module_stack


def _module_path(node) -> str | None:
    stack = module_stack(node)
    if not stack:
        return None
    fqn, name = stack[-1]
    return f"{fqn} ({name})"


def graph_facts(gm, graph_kind: str, region, show_device=None) -> dict[str, dict]:
    """Node name -> its facts, for one AOT graph (forward or backward) of ``region``.

    ``show_device`` names a device as the user reads it (``DeviceReport.show``: the meta stand-in
    reads ``cuda:0 (predicted)``, as every other view says)."""
    roles = {p.graph_name: p for p in placeholder_roles(gm, region, graph_kind)}
    saved_out: set[str] = set()
    if graph_kind == "forward":
        out = next(iter(gm.graph.find_nodes(op="output")), None)
        values = list(out.args[0]) if out is not None and out.args else []
        for value, role in zip(values, output_roles(gm, region)):
            if role.kind == "saved_for_backward" and hasattr(value, "name"):
                saved_out.add(value.name)
    facts: dict[str, dict] = {}
    for node in gm.graph.nodes:
        if node.op not in ("placeholder", "call_function"):
            continue
        shape, dtype, device = tensor_meta(node)
        src = user_source(node.meta.get("stack_trace"))
        fact = {
            "graph_name": node.name,
            "shape": list(shape) if shape is not None else None,
            "dtype": dtype,
            "device": show_device(device) if show_device and device else device,
            "source": str(src) if src else None,
            "module": _module_path(node),
            "inputs": [a.name for a in node.all_input_nodes],
            "users": [u.name for u in node.users if u.op != "output"],
        }
        if node.op == "placeholder":
            p = roles[node.name]
            fact.update(name=p.name, kind=p.kind, op="placeholder", target=p.target)
            if graph_kind == "backward" and p.kind == "saved":
                fact["saved"] = f"saved by the forward's node {node.name}"
        else:
            fact.update(name=node.name, kind="op", op=op_name(node))
            if node.name in saved_out:
                fact["saved"] = "its value is saved for the backward"
        facts[node.name] = fact
    return facts


def source_snippet(file: str | None, line: int | None, context: int = 2) -> list[tuple[int, str]] | None:
    """The lines around ``file:line`` as ``(number, text)`` pairs, or None when the file cannot be read.

    >>> source_snippet(__file__, 1, context=0)
    [(1, '\"\"\"What the HTML report shows when a node is clicked, and which folded box holds a node.')]
    """
    if not file or not line:
        return None
    lines = linecache.getlines(file)
    if not lines or line > len(lines):
        return None
    lo, hi = max(1, line - context), min(len(lines), line + context)
    return [(n, lines[n - 1].rstrip("\n")) for n in range(lo, hi + 1)]




def fold_level(drawing: Drawing, depth: int) -> tuple[Drawing, dict[str, str]]:
    """``collapse(drawing, depth)`` and, for every node folded away, the id of the box that holds it,
    read from the fold itself (not guessed from labels)."""
    return collapse_with_members(drawing, depth)
