"""Drawable graphs as plain values, built from an autograd capture or from AOT FX graphs, and
collapsed by module for large models.

``Drawing`` is what ``graphtool.render.dot`` draws: it knows nothing of Graphviz, and the renderer
computes nothing. Collapsing folds nodes into one box per module at a depth, then folds runs of
identical sibling blocks (``12 x TransformerEncoderLayer``).

Example::

    >>> from graphtool.capture.autograd_graph import capture_autograd
    >>> from graphtool.capture.user.script import load_model
    >>> picture = autograd_drawing(capture_autograd(load_model("examples/mlp.py")))
    >>> picture.title, len(picture.nodes)
    ('autograd graph', 10)
    >>> sorted(n.label for n in collapse(picture, depth=1).nodes if n.kind == "module")
    ['Linear\\nfc1\\n4 nodes', 'Linear\\nfc2\\n4 nodes']
"""

from __future__ import annotations

import os
import re
from collections import Counter
from dataclasses import dataclass, replace

from graphtool.analysis.graph_summary import op_name, placeholder_roles, user_source
from graphtool.analysis.module_names import module_stack

#: above this many nodes (output markers not counted) a picture of a model with modules opens folded
#: by module: a person reads a few dozen boxes at a glance, not a transformer's few hundred ops
COLLAPSE_THRESHOLD = 120
#: the most boxes and loose nodes a picture opens with when it is folded (see :func:`auto_depth`)
OPEN_LIMIT = 60
_BACKWARD = re.compile(r"Backward\d*$")


MARKS = ("cudagraph_skip", "device", "mutated", "alias", "recomputed")  # most severe first
CONTAINERS = ("ModuleList", "ModuleDict", "Sequential")


@dataclass(frozen=True)
class DrawNode:
    id: str
    label: str
    kind: str  # op | parameter | buffer | user_input | intermediate | tangent | saved | other | leaf | output | module
    family: str  # colour key: the op family, or the module class
    module: tuple[tuple[str, str], ...] = ()  # (fqn, class) per module depth: the clusters it sits in
    tooltip: str | None = None
    highlight: str | None = None  # why it stands out (mutated input, CPU node, cudagraph skip...)
    cluster: str | None = None  # forward / backward in the joint graph
    count: int = 1  # nodes folded into this one
    mark: str | None = None  # one of MARKS: how the picture marks it (colour, shape, legend)
    roles: tuple[tuple[str, str], ...] = ()  # output markers: (role, detail), role in output|saved|gradient|update
    call: str | None = None  # the helper a forward called to make it: "create_causal_mask()\nmodeling_phi.py:358"


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


def mark_of(reason: str | None) -> str | None:
    """The picture's category for a highlight reason (see :data:`MARKS`)."""
    if not reason:
        return None
    if reason.startswith("runs on"):
        return "device"
    if reason.startswith("mutated"):
        return "mutated"
    if "aliases" in reason:
        return "alias"
    return "cudagraph_skip"


def module_path(fqn: str | None, classes: dict, known: dict | None = None) -> tuple[tuple[str, str], ...]:
    """One ``(fqn, class)`` per module depth, containers included, so depth N is the FQN's N-th level::

        >>> module_path("layers.0.mlp", {"layers": "ModuleList", "layers.0": "Block", "layers.0.mlp": "MLP"})
        (('layers', 'ModuleList'), ('layers.0', 'Block'), ('layers.0.mlp', 'MLP'))
    """
    if not fqn:
        return ()
    known = known or {}
    parts = fqn.split(".")
    prefixes = (".".join(parts[:i]) for i in range(1, len(parts) + 1))
    return tuple((p, classes.get(p) or known.get(p, "")) for p in prefixes)


def marker_label(roles) -> str:
    """``(("output", "0"), ("saved", ""), ("saved", ""))`` -> ``"output 0\\nsaved x2"``."""
    by_role: dict[str, list[str]] = {}
    for role, detail in roles:
        by_role.setdefault(role, []).append(detail)
    lines = []
    for role in ("output", "update", "gradient", "saved"):
        details = by_role.get(role)
        if not details:
            continue
        word = {"output": "output", "update": "new value of", "gradient": "grad", "saved": "saved"}[role]
        named = [d for d in details if d]
        text = f"{word} {_compact(named)}" if named and len(named) == len(details) else ""
        if role == "saved" or not text or len(text) > 48:
            text = f"{word} x{len(details)}" if len(details) > 1 else word
        lines.append(text)
    return "\n".join(lines)


def _compact(names: list[str]) -> str:
    """``["fc1.weight", "fc1.bias"]`` -> ``"fc1.{weight, bias}"``."""
    if len(names) == 1:
        return names[0]
    parts = [n.split(".") for n in names]
    k = 0
    while all(len(p) > k + 1 for p in parts) and len({p[k] for p in parts}) == 1:
        k += 1
    if k == 0:
        return ", ".join(names)
    return ".".join(parts[0][:k]) + ".{" + ", ".join(".".join(p[k:]) for p in parts) + "}"


def _shape(shape) -> str:
    return "(" + ", ".join(str(s) for s in shape) + ")" if shape is not None else ""


def _markers(nodes: list[DrawNode], edges: list, roles_of: dict[str, list[tuple[str, str]]]) -> None:
    """One small marker per producer (outputs, saved tensors, gradients), next to it: a single
    global sink would pull long edges across the whole picture and slow the layout tenfold."""
    by_id = {n.id: n for n in nodes}
    for nid, roles in roles_of.items():
        owner = by_id.get(nid)
        if owner is None:
            continue
        mid = f"{nid}__out"
        nodes.append(DrawNode(mid, marker_label(roles), "output", "output", owner.module, _marker_tip(roles),
                              cluster=owner.cluster, roles=tuple(roles)))
        edges.append((nid, mid))


def _common(paths) -> tuple:
    paths = [p for p in paths if p]
    if not paths:
        return ()
    common = paths[0]
    for p in paths[1:]:
        i = 0
        while i < min(len(common), len(p)) and common[i] == p[i]:
            i += 1
        common = common[:i]
    return common


def _marker_tip(roles) -> str | None:
    named = [f"{role} {detail}" for role, detail in roles if detail]
    return "\n".join(named) or None


def _adopt_sources(nodes: list[DrawNode], edges, *, ops: bool = False) -> list[DrawNode]:
    """Constants, saved tensors and other sources with no module of their own sit in the innermost
    module all their consumers share, so they are drawn (and folded) where they are used.

    Ops that end the graph with no module (the ``copy_`` that writes a mutated buffer back) sit in
    the module that made their inputs. ``ops=True`` (backward graphs) also places every op that
    carries no forward module (the gradient sums autograd adds) in the module its neighbours
    share, instead of loose between modules."""
    consumers: dict[str, list[str]] = {}
    producers: dict[str, list[str]] = {}
    for s, d in edges:
        consumers.setdefault(s, []).append(d)
        producers.setdefault(d, []).append(s)
    by_id = {n.id: n for n in nodes}
    for _ in range(6 if ops else 1):  # a chain of sums takes a few passes
        changed = False
        for n in nodes:
            if n.module or n.kind in ("user_input", "tangent", "output"):
                continue
            # an in-place op that ends the graph: the copy_ writing a mutated buffer back
            sink = n.kind == "op" and n.id not in consumers and n.family.endswith("_")
            if n.id in producers and not (ops and n.kind == "op") and not sink:
                continue
            if sink and not ops and not all(by_id[x].module for x in producers.get(n.id, []) if x in by_id):
                continue
            near = [by_id[x].module for x in consumers.get(n.id, []) + producers.get(n.id, [])
                    if x in by_id and by_id[x].kind not in ("output", "user_input", "tangent") and by_id[x].module]
            if not near or (n.kind != "op" and len(near) < len(consumers.get(n.id, []))):
                continue  # a source is placed only when every consumer is
            common = _common(near)
            if common:
                by_id[n.id] = replace(n, module=common)
                changed = True
        nodes = [by_id[n.id] for n in nodes]
        if not changed:
            break
    return nodes


# -- autograd ----------------------------------------------------------------------------------


def autograd_drawing(graph, title: str = "autograd graph") -> Drawing:
    nodes = []
    for n in graph.nodes:
        if n.kind == "op":
            label = n.op
            if n.saved:
                label += "\n" + "\n".join(f"{k}: {_shape(s)}" for k, s in n.saved)
            ckpt = getattr(n, "checkpointed", False)
            nodes.append(DrawNode(f"a{n.id}", label, "op", family_of(n.op), n.module,
                                  "inside torch.utils.checkpoint: recomputed in backward" if ckpt else None,
                                  mark="recomputed" if ckpt else None))
        else:
            label = f"{n.name}\n{_shape(n.shape)} {n.dtype}"
            nodes.append(DrawNode(f"a{n.id}", label, n.kind, n.kind, n.module))
    edges = [(f"a{s}", f"a{d}") for s, d in graph.edges]
    nodes = _adopt_sources(nodes, edges)
    roles: dict[str, list] = {}
    for i, nid in graph.outputs:
        roles.setdefault(f"a{nid}", []).append(("output", str(i)))
    _markers(nodes, edges, roles)
    return Drawing(title, tuple(nodes), tuple(edges))


# -- FX graphs ---------------------------------------------------------------------------------

def _fx_module(node, classes: dict) -> tuple[tuple[str, str], ...]:
    """The innermost module dynamo recorded, as a path by FQN (its depth is its FQN's depth)."""
    known = dict(module_stack(node))
    return module_path(list(known)[-1], classes, known) if known else ()


_FRAME = re.compile(r'^\s*File "(?P<file>[^"]+)", line (?P<line>\d+), in (?P<func>\S+)\s*$')
_CALLEE = re.compile(r"([A-Za-z_][\w.]*)\s*\(")


def call_site(stack_trace: str | None) -> str | None:
    r"""The helper function a forward called to make this op, and where: ops a module's forward makes
    through one call (transformers' ``create_causal_mask(...)``, ``self.loss_function(...)``) fold
    into one box named after that call. None for an op written in the forward itself.

    >>> call_site('  File "/m/model.py", line 9, in forward\n    mask = make_mask(x)\n'
    ...           '  File "/m/masks.py", line 3, in make_mask\n    return x > 0\n')
    'make_mask()\nmodel.py:9'
    >>> call_site('  File "/m/model.py", line 9, in forward\n    y = x + 1\n') is None
    True
    """
    if not stack_trace:
        return None
    lines = stack_trace.splitlines()
    frames = []
    for i, text in enumerate(lines):
        m = _FRAME.match(text)
        if m:
            frames.append((m.group("file"), m.group("line"), m.group("func"), lines[i + 1].strip() if i + 1 < len(lines) else ""))
    forwards = [i for i, f in enumerate(frames) if f[2] == "forward"]
    anchor = forwards[-1] if forwards else 0  # a function model: its own frame
    if anchor >= len(frames) - 1:
        return None
    file, line, _, code = frames[anchor]
    head, eq, tail = code.partition("=")
    callee = _CALLEE.search(tail if eq and "(" not in head else code)
    if callee is None:
        return None
    name = callee.group(1).removeprefix("self.")
    return f"{name}()\n{file.replace(chr(92), '/').rsplit('/', 1)[-1]}:{line}"


def _owner(fqn: str | None, classes: dict) -> tuple[tuple[str, str], ...]:
    if not fqn or "." not in fqn:
        return ()
    return module_path(fqn.rsplit(".", 1)[0], classes)


def _output_roles(gm, region, graph_kind: str) -> dict[str, list]:
    from graphtool.capture import compat

    out = next(iter(gm.graph.find_nodes(op="output")))
    values = list(out.args[0]) if out.args and isinstance(out.args[0], (list, tuple)) else list(out.args)
    descs = compat.output_descriptors(gm.graph) or []
    found: dict[str, list] = {}
    for pos, value in enumerate(values):
        if not hasattr(value, "name"):
            continue
        role, detail = compat.describe_aot_output(descs[pos]) if pos < len(descs) else ("none", None)
        name = ""
        if role in ("mutated_input", "gradient") and detail is not None and detail < len(region.inputs):
            name = region.inputs[detail].name
        entry = {"user_output": ("output", str(detail if detail is not None else pos)), "mutated_input": ("update", name),
                 "gradient": ("gradient", name), "saved_for_backward": ("saved", "")}.get(role)
        if entry is None:
            entry = ("saved", "") if graph_kind == "forward" and role != "none" else ("output", str(pos))
        found.setdefault(value.name, []).append(entry)
    return found


def fx_drawing(gm, graph_kind: str, region, *, highlights: dict | None = None, classes: dict | None = None,
               prefix: str = "", cluster: str | None = None, main_device: str | None = None) -> Drawing:
    """One AOT graph: placeholders by kind and name, ops by name, the user's line as tooltip; each
    output, saved tensor or gradient as a small marker beside the node that makes it.

    ``highlights`` maps a node name to the reason it stands out (mutated inputs, cudagraph skips);
    nodes on a device other than ``main_device`` are highlighted too. Forward ops inside
    ``torch.utils.checkpoint`` and backward ops the partitioner recomputes are marked ``recomputed``.
    """
    from graphtool.capture import compat

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
            reason = highlights.get(node.name)
            nodes.append(DrawNode(nid, label, p.kind, p.kind, module, f"{node.name}: {p.kind} {p.name}",
                                  reason, cluster, mark=mark_of(reason)))
        elif node.op in ("call_function", "get_attr"):
            op = op_name(node) if node.op == "call_function" else f"constant {node.target}"
            src = user_source(node.meta.get("stack_trace"))
            reason = highlights.get(node.name)
            val = node.meta.get("val")
            device = str(getattr(val, "device", "")) or None
            if reason is None and main_device and device and device.split(":")[0] != main_device:
                reason = f"runs on {device}"
            mark = mark_of(reason)
            recomputed = None
            if graph_kind == "backward" and compat.partitioner_tag(node) == "is_forward":
                recomputed = "recomputed in backward"
            elif graph_kind == "forward" and compat.checkpoint_policy(node) is not None:
                recomputed = "checkpointed: recomputed in backward"
            if recomputed and mark is None:
                mark = "recomputed"
            tip = f"{node.name}: {op}" + "".join(f"\n{t}" for t in (src, reason, recomputed) if t)
            short = op.split(".")[1] if op.startswith(("aten.", "prims.")) and op.count(".") == 2 else op
            nodes.append(DrawNode(nid, short, "op", family_of(op), _fx_module(node, classes), tip, reason, cluster, mark=mark,
                                  call=call_site(node.meta.get("stack_trace"))))
        else:
            continue
        for arg in node.all_input_nodes:
            edges.append((prefix + arg.name, nid))
    nodes = _with_users(_adopt_sources(nodes, edges, ops=graph_kind == "backward"), edges)
    outputs = _output_roles(gm, region, graph_kind)
    _markers(nodes, edges, {prefix + k: v for k, v in outputs.items()})
    return Drawing(f"{graph_kind} graph", tuple(nodes), tuple(edges))


def _with_users(nodes: list[DrawNode], edges) -> list[DrawNode]:
    """Each tangent (a gradient flowing into the backward) in the deepest module cluster that all the
    ops using it share, as a parameter sits with its module: left at the top it was the only node
    directly in the joint picture's "backward" cluster, a box that seemed to hold it alone."""
    by_id = {n.id: n for n in nodes}
    users: dict[str, list[tuple]] = {}
    for s_, d in edges:
        if d in by_id and by_id[d].kind != "output":
            users.setdefault(s_, []).append(by_id[d].module)
    return [replace(n, module=tuple(os.path.commonprefix(users[n.id])))
            if n.kind == "tangent" and users.get(n.id) else n for n in nodes]


def joint_drawing(forward: Drawing, backward: Drawing) -> Drawing:
    """Forward and backward in one picture: a backward input that the forward saved is drawn as
    the forward node that produced it, so the saved-tensor edges cross between the two."""
    fw_ids = {n.id[len("fw_"):]: n.id for n in forward.nodes}
    rename = {}
    nodes, dropped = [], set()
    for n in forward.nodes:  # the saved-tensor edges are drawn here: "saved" markers would say it twice
        kept = tuple(r for r in n.roles if r[0] != "saved")
        if n.kind == "output" and not kept:
            dropped.add(n.id)
            continue
        nodes.append(replace(n, roles=kept, label=marker_label(kept)) if kept != n.roles else n)
    forward = replace(forward, edges=tuple(e for e in forward.edges if e[1] not in dropped))
    for n in backward.nodes:
        bare = n.id[len("bw_"):]
        if n.kind in ("saved", "parameter", "buffer", "user_input", "intermediate", "other") and bare in fw_ids:
            rename[n.id] = fw_ids[bare]
            continue
        nodes.append(n)
    edges = list(forward.edges) + [(rename.get(s, s), rename.get(d, d)) for s, d in backward.edges]
    return Drawing("joint graph", tuple(nodes), tuple(dict.fromkeys(edges)))


# -- collapsing --------------------------------------------------------------------------------


def _span(fqns: list[str]) -> str:
    """``["layers.1", ..., "layers.11"]`` -> ``"layers.1-11"``."""
    head, _, first = fqns[0].rpartition(".")
    last = fqns[-1].rpartition(".")[2]
    return fqns[0] if len(fqns) == 1 else f"{head}.{first}-{last}"


def collapse(graph: Drawing, depth: int) -> Drawing:
    """:func:`collapse_with_members` without the membership."""
    return collapse_with_members(graph, depth)[0]


def collapse_with_members(graph: Drawing, depth: int) -> tuple[Drawing, dict[str, str]]:
    """The folded drawing, and for every node folded into a box (outputs merged into a box's marker
    included), the id of the drawn node that now holds it.

    Fold nodes into one box per module at module depth ``depth`` (1 = the root's children,
    2 = theirs, by FQN: ``layers`` is depth 1, ``layers.0`` depth 2); modules above that depth
    stay as clusters around their boxes and their own ops, never beside them.

    Runs of identical sibling blocks (``layers.1`` .. ``layers.11``, same ops and shapes) fold
    further: at the chosen depth into one ``12 x Class`` box labelled ``layers.0-11``; above it,
    the first block stays expanded and the rest become one ``11 x Class`` box (``layers.1-11``).
    Each box's outputs, saved tensors and gradients become one marker beside it.
    """
    subtree: dict[tuple[str, str], list[DrawNode]] = {}
    for n in graph.nodes:
        for fqn, _cls in n.module:
            subtree.setdefault((n.cluster or "", fqn), []).append(n)
    classes = {fqn: cls for n in graph.nodes for fqn, cls in n.module}
    parents = {fqn for n in graph.nodes for fqn, _ in n.module[:-1]}
    runs = _identical_runs(subtree, classes)
    whole = _containers_of_one_run(subtree, runs, classes)
    boxes: dict[str, dict] = {}
    group_of: dict[str, str] = {}
    for n in graph.nodes:
        if not n.module or n.kind in ("output", "tangent"):  # a tangent stays a node beside its users' box
            continue
        cl = n.cluster or ""
        key = None
        for level, (fqn, cls) in enumerate(n.module[:depth], start=1):
            run = runs.get((cl, fqn))
            members = None
            if run is not None and level == depth:
                members = run
            elif run is not None and fqn != run[0] and len(run) > 2:
                members = run[1:]
            if members is not None:
                key = f"run:{cl}:{members[0]}"
                boxes.setdefault(key, {"fqn": _span(members), "cls": f"{len(members)} x {cls}", "level": level, "members": []})
                break
            if level == depth or (level == len(n.module) and fqn not in parents):  # a leaf module above depth: a box too
                key = f"mod:{cl}:{fqn}"
                label_fqn, label_cls = fqn, cls
                if (cl, fqn) in whole:  # a ModuleList of identical blocks reads as its run
                    run_of, run_cls = whole[(cl, fqn)]
                    label_fqn, label_cls = _span(run_of), f"{len(run_of)} x {run_cls}"
                boxes.setdefault(key, {"fqn": label_fqn, "cls": label_cls, "level": level, "members": []})
        if key is None:
            continue
        b = boxes[key]
        b["members"].append(n)
        b.setdefault("module", n.module[:b["level"] - 1])
        b.setdefault("cluster", n.cluster)
        group_of[n.id] = key
    _fold_calls(graph, group_of, boxes)
    _absorb_sandwiched(graph, group_of, boxes)
    box_id = {k: re.sub(r"[^A-Za-z0-9_]", "_", k) for k in boxes}
    ids = {nid: box_id[key] for nid, key in group_of.items()}
    by_id = {n.id: n for n in graph.nodes}
    marker_roles: dict[str, list] = {}
    for s_, d in graph.edges:  # markers of folded producers merge into one marker per box
        dn = by_id.get(d)
        if dn is not None and dn.kind == "output" and s_ in ids:
            marker_roles.setdefault(ids[s_], []).extend(dn.roles)
    folded_markers = {d for s_, d in graph.edges if s_ in ids and d in by_id and by_id[d].kind == "output"}
    nodes, emitted = [], set()
    for n in graph.nodes:
        key = group_of.get(n.id)
        if key is None:
            if n.id not in folded_markers:
                nodes.append(n)
            continue
        if key in emitted:
            continue
        emitted.add(key)
        nodes.append(_box(box_id[key], boxes[key]))
    edges = []
    for s_, d in graph.edges:
        a, b_ = ids.get(s_, s_), ids.get(d, d)
        if a != b_ and d not in folded_markers:
            edges.append((a, b_))
    box_nodes = {n.id: n for n in nodes}
    for bid, roles in marker_roles.items():
        box = box_nodes[bid]
        nodes.append(DrawNode(f"{bid}__out", marker_label(roles), "output", "output", box.module, _marker_tip(roles),
                              cluster=box.cluster, roles=tuple(roles)))
        edges.append((bid, f"{bid}__out"))
    members = dict(ids)
    for s_, d in graph.edges:  # an output marker merged into its box's marker is held by that marker
        if d in folded_markers and s_ in ids:
            members.setdefault(d, f"{ids[s_]}__out")
    edges = list(dict.fromkeys(edges))
    return Drawing(graph.title, tuple(_with_users(nodes, edges)), tuple(edges), graph.note), members


CALL_MIN = 3  # ops one helper call must make to fold into a box of its own


def _fold_calls(graph: Drawing, group_of: dict, boxes: dict) -> None:
    """Ops still loose after the fold by module (written in a module's own forward, not in a child),
    grouped by the helper call that made them: the causal mask, the loss, a rotary embedding written
    as a function read as one box each, named after the call, instead of dozens of loose ops."""
    calls: dict[str, list[DrawNode]] = {}
    for n in graph.nodes:
        if n.id in group_of or n.kind != "op" or not n.call:
            continue
        calls.setdefault(f"call:{n.cluster or ''}:{n.module[-1][0] if n.module else ''}:{n.call}", []).append(n)
    for key, members in calls.items():
        if len(members) < CALL_MIN:
            continue
        name, _, where = members[0].call.partition("\n")
        boxes[key] = {"fqn": where, "cls": name, "level": len(members[0].module) + 1, "members": members,
                      "module": members[0].module, "cluster": members[0].cluster}
        for n in members:
            group_of[n.id] = key


def _absorb_sandwiched(graph: Drawing, group_of: dict, boxes: dict) -> None:
    """Loose nodes that lie on a path from a run's box back into it join the run.

    In a backward graph the gradient sums of residual connections (``x + block(x)``) carry no forward
    module; they sit between block ``i + 1``'s gradients and block ``i``'s, in the container. Folding
    the run of blocks into one box without them draws a cycle through every sum (box -> sum -> box),
    and Graphviz took minutes over 150 such nodes (graphviz-pure over 300 s for a 50-block model). A
    run's box is a contiguous stretch of the graph, so what lies between its members is part of it.
    Linear in the graph's size per run box."""
    runs = [k for k in boxes if k.startswith("run:")]
    if not runs:
        return
    forward: dict[str, list[str]] = {}
    backward: dict[str, list[str]] = {}
    for s_, d in graph.edges:
        forward.setdefault(s_, []).append(d)
        backward.setdefault(d, []).append(s_)
    loose = {n.id: n for n in graph.nodes if n.id not in group_of and n.kind not in ("output", "tangent", "user_input")}
    for key in runs:
        inside = {n.id for n in boxes[key]["members"]}
        between = _reach(inside, forward) & _reach(inside, backward)
        taken = [loose[nid] for nid in sorted(between) if nid in loose and nid not in group_of]
        for n in taken:
            group_of[n.id] = key
        boxes[key]["members"].extend(taken)


def _reach(start: set[str], edges: dict[str, list[str]]) -> set[str]:
    """Every node reachable from ``start`` along ``edges``, ``start`` itself left out."""
    seen, stack = set(start), list(start)
    while stack:
        for nxt in edges.get(stack.pop(), ()):
            if nxt not in seen:
                seen.add(nxt)
                stack.append(nxt)
    return seen - start


def _box(bid: str, b: dict) -> DrawNode:
    ms = b["members"]
    reasons = sorted({m.highlight for m in ms if m.highlight})
    marks = {m.mark for m in ms if m.mark}
    mark = next((m for m in MARKS if m in marks), None)
    recomputed = sum(1 for m in ms if m.mark == "recomputed")
    extra = [f"{recomputed} recomputed"] if recomputed else []
    ops = sum(1 for m in ms if m.kind == "op")
    return DrawNode(
        id=bid,
        label="\n".join([b["cls"], b["fqn"], f"{len(ms)} nodes", *extra]),
        kind="module",
        family=b["cls"].split(" x ")[-1],
        module=b["module"],
        tooltip=f"{b['fqn']}: {len(ms)} nodes ({ops} ops)" + "".join(f"\n{r}" for r in reasons + extra),
        highlight="; ".join(reasons) or None,
        cluster=b["cluster"],
        count=len(ms),
        mark=mark,
    )


def _containers_of_one_run(subtree: dict, runs: dict, classes: dict) -> dict:
    """A ModuleList/Sequential whose children are one run of identical blocks: (its run, class)."""
    found = {}
    for (cl, fqn) in subtree:
        if classes.get(fqn) not in CONTAINERS:
            continue
        children = sorted({f for (c, f) in subtree if c == cl and f.rpartition(".")[0] == fqn})
        run = runs.get((cl, children[0])) if children else None
        if run is not None and sorted(run) == children:
            found[(cl, fqn)] = (run, classes.get(run[0], ""))
    return found


def _shape_key(n: DrawNode) -> str:
    """What a node is, without its name: ops by label, inputs by kind, shape and dtype."""
    return n.label if n.kind in ("op", "module") else n.kind + ":" + n.label.split("\n", 1)[-1]


def _identical_runs(subtree: dict, classes: dict) -> dict[tuple[str, str], list[str]]:
    """(cluster, fqn) -> the run of consecutive identical siblings it belongs to (fqns, in order)."""
    by_parent: dict[tuple, list[tuple[int, str]]] = {}
    for (cl, fqn), ms in subtree.items():
        head, _, last = fqn.rpartition(".")
        if last.isdigit():
            sig = (classes.get(fqn), tuple(sorted(Counter(_shape_key(m) for m in ms if m.kind != "output").items())))
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


def opening_depth(graph: Drawing, limit: int = OPEN_LIMIT) -> int | None:
    """The fold depth a picture opens at: None (every node) when it is small enough to read whole
    or has no modules to fold by, else :func:`auto_depth`."""
    size = sum(1 for n in graph.nodes if n.kind != "output")
    if size <= COLLAPSE_THRESHOLD or not any(n.module for n in graph.nodes):
        return None
    return auto_depth(graph, limit)


def auto_depth(graph: Drawing, limit: int = OPEN_LIMIT) -> int:
    """The deepest module level whose collapsed picture keeps at most ``limit`` boxes and nodes
    (output markers not counted)."""
    deepest = max((len(n.module) for n in graph.nodes), default=1)
    best = 1
    for depth in range(1, max(deepest, 1) + 1):
        if sum(1 for n in collapse(graph, depth).nodes if n.kind != "output") <= limit:
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
