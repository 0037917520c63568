"""Drawable graphs as plain values, built from an autograd capture or from AOT FX graphs, and
collapsed by module for large models.

``Drawing`` is what ``graphtool.render.dot`` draws: it knows nothing of Graphviz, and the renderer
computes nothing. Collapsing folds nodes into one box per module at a depth, then folds runs of
identical sibling blocks (``12 x TransformerEncoderLayer``).

Example::

    >>> from graphtool.capture.autograd_graph import capture_autograd
    >>> from graphtool.capture.script import load_model
    >>> picture = autograd_drawing(capture_autograd(load_model("examples/mlp.py")))
    >>> picture.title, len(picture.nodes)
    ('autograd graph', 10)
    >>> sorted(n.label for n in collapse(picture, depth=1).nodes if n.kind == "module")
    ['Linear\\nfc1\\n4 nodes', 'Linear\\nfc2\\n4 nodes']
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass

from graphtool.analysis.graph_summary import op_name, placeholder_roles, user_source

COLLAPSE_THRESHOLD = 500
_BACKWARD = re.compile(r"Backward\d*$")


@dataclass(frozen=True)
class DrawNode:
    id: str
    label: str
    kind: str  # op | parameter | buffer | user_input | tangent | saved | other | leaf | output | module
    family: str  # colour key: the op family, or the module class
    module: tuple[tuple[str, str], ...] = ()
    tooltip: str | None = None
    highlight: str | None = None  # why it stands out (mutated input, CPU node, cudagraph skip...)
    cluster: str | None = None  # forward / backward in the joint graph
    count: int = 1  # nodes folded into this one


@dataclass(frozen=True)
class Drawing:
    title: str
    nodes: tuple[DrawNode, ...]
    edges: tuple[tuple[str, str], ...]
    note: str | None = None


def family_of(op: str) -> str:
    """``AddmmBackward0`` -> ``addmm``; ``aten.addmm.default`` -> ``addmm``."""
    op = _BACKWARD.sub("", op)
    if op.startswith("aten."):
        op = op.split(".")[1]
    return op.lower().lstrip("_")


def _shape(shape) -> str:
    return "(" + ", ".join(str(s) for s in shape) + ")" if shape is not None else ""


# -- autograd ----------------------------------------------------------------------------------


def autograd_drawing(graph, title: str = "autograd graph") -> Drawing:
    nodes = []
    for n in graph.nodes:
        if n.kind == "op":
            label = n.op
            if n.saved:
                label += "\n" + "\n".join(f"{k}: {_shape(s)}" for k, s in n.saved)
            nodes.append(DrawNode(f"a{n.id}", label, "op", family_of(n.op), n.module))
        else:
            label = f"{n.name}\n{_shape(n.shape)} {n.dtype}"
            nodes.append(DrawNode(f"a{n.id}", label, n.kind, n.kind, n.module))
    edges = [(f"a{s}", f"a{d}") for s, d in graph.edges]
    for i, nid in graph.outputs:
        nodes.append(DrawNode(f"out{i}", f"output {i}", "output", "output"))
        edges.append((f"a{nid}", f"out{i}"))
    return Drawing(title, tuple(nodes), tuple(edges))


# -- FX graphs ---------------------------------------------------------------------------------

_SOURCE_PREFIX = re.compile(r"^L\['[^']+'\]\.?")
_MODULES_KEY = re.compile(r"\._modules\['([^']+)'\]|\[(\d+)\]")


def _clean_fqn(fqn: str) -> str:
    fqn = _SOURCE_PREFIX.sub("", fqn)
    return _MODULES_KEY.sub(lambda m: "." + (m.group(1) or m.group(2)), fqn).lstrip(".")


def _fx_module(node) -> tuple[tuple[str, str], ...]:
    stack = node.meta.get("nn_module_stack") or node.meta.get("fwd_nn_module_stack") or {}
    path = []
    for fqn, cls in stack.values():
        clean = _clean_fqn(str(fqn))
        name = getattr(cls, "__name__", str(cls).rsplit(".", 1)[-1].strip("'>"))
        if clean and name not in ("ModuleList", "ModuleDict", "Sequential"):
            path.append((clean, name))
    return tuple(path)


def _owner(fqn: str | None, classes: dict) -> tuple[tuple[str, str], ...]:
    if not fqn or "." not in fqn:
        return ()
    parts = fqn.split(".")[:-1]
    return tuple((".".join(parts[:i]), classes.get(".".join(parts[:i]), "")) for i in range(1, len(parts) + 1)
                 if classes.get(".".join(parts[:i]), "") not in ("ModuleList", "ModuleDict", "Sequential"))


def fx_drawing(gm, graph_kind: str, region, *, highlights: dict | None = None, classes: dict | None = None,
              prefix: str = "", cluster: str | None = None, main_device: str | None = None) -> Drawing:
    """One AOT graph: placeholders by kind and name, ops by name, the user's line as tooltip.

    ``highlights`` maps a node name to the reason it stands out (mutated inputs, cudagraph skips);
    nodes on a device other than ``main_device`` are highlighted too.
    """
    highlights = highlights or {}
    classes = classes or {}
    roles = {p.graph_name: p for p in placeholder_roles(gm, region, graph_kind)}
    nodes, edges = [], []
    for node in gm.graph.nodes:
        nid = prefix + node.name
        if node.op == "placeholder":
            p = roles[node.name]
            label = f"{p.name}\n{_shape(p.shape)} {p.dtype or ''}".rstrip()
            module = _owner(p.target, classes) if p.kind in ("parameter", "buffer") else ()
            nodes.append(DrawNode(nid, label, p.kind, p.kind, module, f"{node.name}: {p.kind} {p.name}",
                               highlights.get(node.name), cluster))
            continue
        if node.op == "output":
            nodes.append(DrawNode(nid, f"{graph_kind} outputs", "output", "output", (), None, None, cluster))
        elif node.op == "call_function":
            op = op_name(node)
            src = user_source(node.meta.get("stack_trace"))
            reason = highlights.get(node.name)
            val = node.meta.get("val")
            device = str(getattr(val, "device", "")) or None
            if reason is None and main_device and device and device.split(":")[0] != main_device:
                reason = f"runs on {device}"
            tip = f"{node.name}: {op}" + (f"\n{src}" if src else "") + (f"\n{reason}" if reason else "")
            short = op.replace("aten.", "").rsplit(".", 1)[0] if op.startswith("aten.") else op
            nodes.append(DrawNode(nid, short, "op", family_of(op), _fx_module(node), tip, reason, cluster))
        else:
            continue
        for arg in node.all_input_nodes:
            edges.append((prefix + arg.name, nid))
    return Drawing(f"{graph_kind} graph", tuple(nodes), tuple(edges))


def joint_drawing(forward: Drawing, backward: Drawing) -> Drawing:
    """Forward and backward in one picture: a backward input that the forward saved is drawn as
    the forward node that produced it, so the saved-tensor edges cross between the two."""
    fw_ids = {n.id[len("fw_"):]: n.id for n in forward.nodes}
    rename = {}
    nodes = list(forward.nodes)
    for n in backward.nodes:
        bare = n.id[len("bw_"):]
        if n.kind in ("saved", "parameter", "buffer", "user_input", "other") and bare in fw_ids:
            rename[n.id] = fw_ids[bare]
            continue
        nodes.append(n)
    edges = list(forward.edges) + [(rename.get(s, s), rename.get(d, d)) for s, d in backward.edges]
    return Drawing("joint graph", tuple(nodes), tuple(dict.fromkeys(edges)))


# -- collapsing --------------------------------------------------------------------------------


def collapse(graph: Drawing, depth: int) -> Drawing:
    """Fold nodes into one box per module at ``depth`` (1 = the root's children).

    Runs of identical sibling blocks (``layers.1`` .. ``layers.11`` with the same ops and shapes)
    fold further: at the chosen depth into one ``N x Class`` box; above it, the first block of the
    run stays expanded and the others become one ``N x Class`` box.
    """
    subtree: dict[tuple[str, str], list[DrawNode]] = {}
    for n in graph.nodes:
        for fqn, _cls in n.module:
            subtree.setdefault((n.cluster or "", fqn), []).append(n)
    classes = {fqn: cls for n in graph.nodes for fqn, cls in n.module}
    runs = _identical_runs(subtree, classes)
    boxes: dict[str, dict] = {}
    group_of: dict[str, str] = {}
    for n in graph.nodes:
        if not n.module or n.kind == "output":
            continue
        cl = n.cluster or ""
        key = None
        for level, (fqn, cls) in enumerate(n.module[:depth], start=1):
            run = runs.get((cl, fqn))
            if run is not None and (level == depth or fqn != run[0]):
                members = run if level == depth else run[1:]
                if fqn in members:
                    key = f"run:{cl}:{members[0]}"
                    boxes.setdefault(key, {"fqn": f"{members[0]} .. {members[-1]}", "cls": f"{len(members)} x {cls}", "cluster": n.cluster, "members": []})
                    break
            key = f"mod:{cl}:{fqn}"
            boxes.setdefault(key, {"fqn": fqn, "cls": cls, "cluster": n.cluster, "members": []})
        if key is None:
            continue
        boxes[key]["members"].append(n)
        group_of[n.id] = key
    box_id = {k: re.sub(r"[^A-Za-z0-9_]", "_", k) for k in boxes}
    nodes, emitted = [], set()
    for n in graph.nodes:
        key = group_of.get(n.id)
        if key is None:
            nodes.append(n)
            continue
        if key in emitted:
            continue
        emitted.add(key)
        b = boxes[key]
        ms = b["members"]
        reasons = sorted({m.highlight for m in ms if m.highlight})
        nodes.append(DrawNode(
            id=box_id[key],
            label=f"{b['cls']}\n{b['fqn']}\n{len(ms)} nodes",
            kind="module",
            family=b["cls"].split(" x ")[-1],
            tooltip=f"{b['fqn']}: {len(ms)} nodes" + ("\n" + "\n".join(reasons) if reasons else ""),
            highlight="; ".join(reasons) or None,
            cluster=b["cluster"],
            count=len(ms),
        ))
    ids = {nid: box_id[key] for nid, key in group_of.items()}
    edges = []
    for s_, d in graph.edges:
        a, b_ = ids.get(s_, s_), ids.get(d, d)
        if a != b_:
            edges.append((a, b_))
    return Drawing(graph.title, tuple(nodes), tuple(dict.fromkeys(edges)), graph.note)


def _shape_key(n: DrawNode) -> str:
    """What a node is, without its name: ops by label, inputs by kind, shape and dtype."""
    return n.label if n.kind in ("op", "module") else n.kind + ":" + n.label.split("\n", 1)[-1]


def _identical_runs(subtree: dict, classes: dict) -> dict[tuple[str, str], list[str]]:
    """(cluster, fqn) -> the run of consecutive identical siblings it belongs to (fqns, in order)."""
    by_parent: dict[tuple, list[tuple[int, str]]] = {}
    for (cl, fqn), ms in subtree.items():
        head, _, last = fqn.rpartition(".")
        if last.isdigit():
            sig = (classes.get(fqn), tuple(sorted(Counter(_shape_key(m) for m in ms).items())))
            by_parent.setdefault((cl, head, sig), []).append((int(last), fqn))
    runs: dict[tuple[str, str], list[str]] = {}
    for (cl, _, _), items in by_parent.items():
        items.sort()
        current = [items[0]]
        for idx, fqn in items[1:] + [(None, None)]:
            if idx is not None and idx == current[-1][0] + 1:
                current.append((idx, fqn))
                continue
            if len(current) > 1:
                run = [f for _, f in current]
                runs.update({(cl, f): run for f in run})
            if idx is not None:
                current = [(idx, fqn)]
    return runs


def auto_depth(graph: Drawing, limit: int = 40) -> int:
    """The deepest module level whose collapsed picture keeps at most ``limit`` boxes."""
    deepest = max((len(n.module) for n in graph.nodes), default=1)
    best = 1
    for depth in range(1, max(deepest, 1) + 1):
        if len(collapse(graph, depth).nodes) <= limit:
            best = depth
        else:
            break
    return best


def fx_highlights(region, graph_kind: str) -> dict[str, str]:
    """Node name -> why it stands out: mutated inputs, outputs aliasing inputs, the op that makes
    the cudagraphs backend skip (torch's own first-incompatible-node check)."""
    from graphtool.capture import compat

    gm = region.forward if graph_kind == "forward" else region.backward
    marks: dict[str, str] = {}
    if graph_kind == "forward":
        for rec in region.forward_inputs:
            if rec.mutated:
                marks[rec.graph_name] = f"mutated ({', '.join(rec.mutation_kinds)})"
        out = next(iter(gm.graph.find_nodes(op="output")))
        values = list(out.args[0]) if out.args else []
        descs = compat.output_descriptors(gm.graph) or []
        outputs = region.forward_outputs
        for value, desc in zip(values, descs):
            role, idx = compat.describe_aot_output(desc)
            if role == "user_output" and idx is not None and idx < len(outputs) and hasattr(value, "name"):
                if outputs[idx].alias_type in ("alias_of_input", "is_input"):
                    marks.setdefault(value.name, f"output {idx} aliases an input")
    node = compat.first_incompatible_cudagraph_node(gm)
    if node is not None:
        marks[node.name] = "cudagraphs skip: incompatible op"
    return marks
