"""DOT text for a :class:`~graphtool.analysis.drawing.Drawing`, deterministic run to run.

Colours come from a hash of the op family (or module class), so the same model gives the same
picture; node order is the graph's own order. Each node sits in the clusters of the modules that
contain it, nested as the modules are (``layers.0`` inside ``layers``), so edges stay short and
the layout stays fast. Fonts are Helvetica everywhere (set once for the whole graph), which both
Graphviz and graphviz-pure know.
"""

from __future__ import annotations

import hashlib

# soft fills, readable with black text; index chosen by a hash of the family name
PALETTE = (
    "#cfe2f3", "#d9ead3", "#fff2cc", "#f4cccc", "#d9d2e9", "#fce5cd", "#d0e0e3", "#ead1dc",
    "#c9daf8", "#e6f2c2", "#ffe0b2", "#e1bee7", "#b2dfdb", "#f8bbd0", "#dcedc8", "#ffecb3",
)
FONT = "Helvetica"
KIND_STYLE = {
    "parameter": {"shape": "box", "style": "filled", "fillcolor": "#b7e1cd"},
    "buffer": {"shape": "box", "style": "filled,dashed", "fillcolor": "#d9ead3"},
    "user_input": {"shape": "invhouse", "style": "filled", "fillcolor": "#a4c2f4"},
    "leaf": {"shape": "box", "style": "filled", "fillcolor": "#eeeeee"},
    "tangent": {"shape": "invhouse", "style": "filled", "fillcolor": "#f9cb9c"},
    "saved": {"shape": "box", "style": "filled,rounded", "fillcolor": "#eeeeee"},
    "intermediate": {"shape": "invhouse", "style": "filled,dashed", "fillcolor": "#cfe2f3"},
    "other": {"shape": "box", "style": "filled", "fillcolor": "#eeeeee"},
    "output": {"shape": "house", "style": "filled", "fillcolor": "#ffd966", "fontsize": "8", "height": "0.25",
               "margin": "0.04,0.02"},
    "module": {"shape": "box3d", "style": "filled"},
}
# output markers: filled by their first role
ROLE_FILL = {"output": "#ffd966", "update": "#f6b26b", "gradient": "#f4cccc", "saved": "#e0e0e0"}
# how the picture marks a node, most severe first (analysis.drawing.MARKS)
MARK_STYLE = {
    "cudagraph_skip": {"color": "#cc0000", "penwidth": "3", "shape": "octagon"},
    "device": {"color": "#8e24aa", "penwidth": "3", "dash": "1"},
    "mutated": {"color": "#e69138", "penwidth": "3"},
    "alias": {"color": "#e69138", "penwidth": "2", "dash": "1"},
    "recomputed": {"color": "#3c78d8", "penwidth": "2", "dash": "1"},
}
MARK_LEGEND = {
    "cudagraph_skip": "red octagon: the op that makes CUDA graphs skip",
    "device": "purple dashed: runs on another device (CUDA graphs skip)",
    "mutated": "orange: mutated input",
    "alias": "orange dashed: output aliasing an input",
    "recomputed": "blue dashed: recomputed in backward (checkpoint)",
}
HIGHLIGHT = MARK_STYLE["cudagraph_skip"]
LARGE = 300  # nodes: above this, the layout trades a few edge crossings for speed
LEGEND = (
    ("parameter", "parameter (FQN, shape)"),
    ("buffer", "buffer"),
    ("user_input", "user input / forward argument"),
    ("intermediate", "value from before a graph break"),
    ("tangent", "tangent (backward input)"),
    ("saved", "saved for backward (backward input)"),
    ("module", "module (collapsed)"),
)
ROLE_LEGEND = {"output": "output marker", "update": "new value of a mutated input", "gradient": "gradient marker",
               "saved": "saved-for-backward marker"}


def colour(family: str) -> str:
    """Stable fill colour for an op family or module class."""
    digest = hashlib.md5(family.encode("utf-8"), usedforsecurity=False).digest()
    return PALETTE[digest[0] % len(PALETTE)]


def _attrs(node) -> dict[str, str]:
    attrs = {"label": node.label}
    attrs.update(KIND_STYLE.get(node.kind, {"shape": "box", "style": "filled,rounded"}))
    if node.kind in ("op", "module"):
        attrs["fillcolor"] = colour(node.family)
    if node.kind == "output" and node.roles:
        attrs["fillcolor"] = ROLE_FILL.get(node.roles[0][0], ROLE_FILL["output"])
    if node.tooltip:
        attrs["tooltip"] = node.tooltip
    style = MARK_STYLE.get(node.mark or ("cudagraph_skip" if node.highlight else ""))
    if style:
        extra = {k: v for k, v in style.items() if k != "dash"}
        attrs.update(extra)
        if "dash" in style:
            attrs["style"] = attrs["style"] + ",dashed"
    if node.highlight:
        attrs["label"] = f"{attrs['label']}\n[{node.highlight}]"
    return attrs


def _cluster_label(fqn: str, cls: str) -> str:
    return f"{cls} {fqn}" if cls else fqn


def to_dot(graph, *, legend: bool = True, modules: bool = True) -> str:
    """DOT source of ``graph``; ``modules=False`` leaves out the module clusters (flat picture).

    Example::

        >>> from graphtool.analysis.drawing import DrawNode, Drawing
        >>> g = Drawing("t", (DrawNode("a", "x", "user_input", "user_input"),
        ...                   DrawNode("b", "relu", "op", "relu", (("act", "ReLU"),))), (("a", "b"),))
        >>> 'subgraph cluster__act {' in to_dot(g)
        True
    """
    import graphviz

    dot = graphviz.Digraph(name="graphtool", graph_attr={
        "rankdir": "TB", "fontname": FONT, "label": graph.title + (f"\n{graph.note}" if graph.note else ""),
        "labelloc": "t", "nodesep": "0.25", "ranksep": "0.35",
    }, node_attr={"fontname": FONT, "fontsize": "10"}, edge_attr={"arrowsize": "0.6", "color": "#555555"})
    tree: dict = {"nodes": [], "children": {}}
    for node in graph.nodes:
        where = tree
        path = [(node.cluster, node.cluster, "")] if node.cluster else []
        if modules:
            path += [(f"{node.cluster or ''}_{fqn}", fqn, cls) for fqn, cls in node.module]
        for key, fqn, cls in path:
            where = where["children"].setdefault(key, {"nodes": [], "children": {}, "label": _cluster_label(fqn, cls)})
        where["nodes"].append(node)
    if len(graph.nodes) > LARGE:  # fewer crossing-minimisation passes: seconds saved, a few more crossings
        dot.attr(mclimit="0.3")
    _emit(dot, tree)
    half = {n.id: n.cluster for n in graph.nodes}
    for s, d in graph.edges:
        if half.get(s) and half.get(d) and half[s] != half[d]:
            # joint graph: a saved tensor crossing from forward to backward; drawn, but not allowed
            # to stretch the ranks of both halves (with it, the small Llama's joint took 17 s)
            dot.edge(s, d, constraint="false", style="dashed", color="#7f7f7f")
        else:
            dot.edge(s, d)
    if legend:
        _legend(dot, graph)
    return dot.source


def _emit(parent, tree: dict) -> None:
    for n in tree["nodes"]:
        parent.node(n.id, **_attrs(n))
    for key, child in tree["children"].items():
        with parent.subgraph(name=f"cluster_{key}") as sub:
            sub.attr(label=child["label"], fontname=FONT, fontsize="10", style="rounded", color="#999999", labeljust="l")
            _emit(sub, child)


def _legend(dot, graph) -> None:
    kinds = {n.kind for n in graph.nodes}
    marks = {n.mark or ("cudagraph_skip" if n.highlight else None) for n in graph.nodes} - {None}
    roles = {r for n in graph.nodes for r, _ in n.roles}
    with dot.subgraph(name="cluster_legend") as leg:
        leg.attr(label="legend", fontname=FONT, style="dashed", color="#bbbbbb")
        leg.attr("node", fontsize="9")
        for kind, text in LEGEND:
            if kind in kinds:
                leg.node(f"legend_{kind}", text, **KIND_STYLE[kind])
        for role, text in ROLE_LEGEND.items():
            if role in roles:
                leg.node(f"legend_role_{role}", text, **{**KIND_STYLE["output"], "fillcolor": ROLE_FILL[role], "fontsize": "9"})
        for mark, text in MARK_LEGEND.items():
            if mark in marks:
                style = MARK_STYLE[mark]
                leg.node(f"legend_{mark}", text, shape=style.get("shape", "box"), color=style["color"], penwidth=style["penwidth"],
                         style="filled,dashed" if "dash" in style else "filled", fillcolor="#ffffff")
        leg.node("legend_ops", "ops: colour by op family", shape="box", style="filled,rounded", fillcolor=PALETTE[0])
        names = [f"legend_{k}" for k, _ in LEGEND if k in kinds] + [f"legend_role_{r}" for r in ROLE_LEGEND if r in roles]
        names += [f"legend_{m}" for m in MARK_LEGEND if m in marks] + ["legend_ops"]
        if len({n.cluster for n in graph.nodes if n.cluster}) > 1:
            leg.node("legend_crossing", "grey dashed edge: a tensor the forward\nsaves for the backward", shape="plaintext")
            names.append("legend_crossing")
        for a, b in zip(names, names[1:]):  # one column, not a row as wide as the picture
            leg.edge(a, b, style="invis")
