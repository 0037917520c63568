"""DOT text for a :class:`~graphtool.analysis.drawing.Drawing`, deterministic run to run.

Colours come from a hash of the op family (or module class), so the same model gives the same
picture; node order is the graph's own order. Fonts are Helvetica/Courier, which both Graphviz and
graphviz-pure know.
"""

from __future__ import annotations

import hashlib

# soft fills, readable with black text; index chosen by a hash of the family name
PALETTE = (
    "#cfe2f3", "#d9ead3", "#fff2cc", "#f4cccc", "#d9d2e9", "#fce5cd", "#d0e0e3", "#ead1dc",
    "#c9daf8", "#e6f2c2", "#ffe0b2", "#e1bee7", "#b2dfdb", "#f8bbd0", "#dcedc8", "#ffecb3",
)
KIND_STYLE = {
    "parameter": {"shape": "box", "style": "filled", "fillcolor": "#b7e1cd"},
    "buffer": {"shape": "box", "style": "filled,dashed", "fillcolor": "#d9ead3"},
    "user_input": {"shape": "invhouse", "style": "filled", "fillcolor": "#a4c2f4"},
    "leaf": {"shape": "box", "style": "filled", "fillcolor": "#eeeeee"},
    "tangent": {"shape": "invhouse", "style": "filled", "fillcolor": "#f9cb9c"},
    "saved": {"shape": "box", "style": "filled,rounded", "fillcolor": "#eeeeee"},
    "other": {"shape": "box", "style": "filled", "fillcolor": "#eeeeee"},
    "output": {"shape": "house", "style": "filled", "fillcolor": "#ffd966"},
    "module": {"shape": "box3d", "style": "filled"},
}
HIGHLIGHT = {"color": "#cc0000", "penwidth": "3"}
LEGEND = (
    ("parameter", "parameter (FQN, shape)"),
    ("buffer", "buffer"),
    ("user_input", "user input / forward argument"),
    ("tangent", "tangent (backward input)"),
    ("output", "output"),
    ("module", "module (collapsed)"),
)


def colour(family: str) -> str:
    """Stable fill colour for an op family or module class."""
    digest = hashlib.md5(family.encode("utf-8"), usedforsecurity=False).digest()
    return PALETTE[digest[0] % len(PALETTE)]


def _attrs(node) -> dict[str, str]:
    attrs = {"label": node.label, "fontname": "Helvetica", "fontsize": "10"}
    style = KIND_STYLE.get(node.kind)
    if style:
        attrs.update(style)
    else:
        attrs.update({"shape": "box", "style": "filled,rounded"})
    if node.kind in ("op", "module"):
        attrs["fillcolor"] = colour(node.family)
    if node.tooltip:
        attrs["tooltip"] = node.tooltip
    if node.highlight:
        attrs.update(HIGHLIGHT)
        attrs["label"] = f"{node.label}\n[{node.highlight}]"
    return attrs


def to_dot(graph, *, legend: bool = True) -> str:
    import graphviz

    dot = graphviz.Digraph(name="graphtool", graph_attr={
        "rankdir": "TB", "fontname": "Helvetica", "label": graph.title + (f"\n{graph.note}" if graph.note else ""),
        "labelloc": "t", "nodesep": "0.25", "ranksep": "0.35",
    })
    clusters: dict[str | None, list] = {}
    for node in graph.nodes:
        clusters.setdefault(node.cluster, []).append(node)
    for name, nodes in clusters.items():
        if name is None:
            for n in nodes:
                dot.node(n.id, **_attrs(n))
        else:
            with dot.subgraph(name=f"cluster_{name}") as sub:
                sub.attr(label=name, fontname="Helvetica", style="rounded", color="#999999")
                for n in nodes:
                    sub.node(n.id, **_attrs(n))
    for s, d in graph.edges:
        dot.edge(s, d)
    if legend:
        kinds = {n.kind for n in graph.nodes}
        with dot.subgraph(name="cluster_legend") as leg:
            leg.attr(label="legend", fontname="Helvetica", style="dashed", color="#bbbbbb")
            for kind, text in LEGEND:
                if kind in kinds:
                    leg.node(f"legend_{kind}", text, fontname="Helvetica", fontsize="9", **KIND_STYLE[kind])
            if any(n.highlight for n in graph.nodes):
                leg.node("legend_highlight", "red border: mutated input, other device,\nor a CUDA-graph skip",
                         shape="box", fontname="Helvetica", fontsize="9", **HIGHLIGHT)
            leg.node("legend_ops", "ops: colour by op family", shape="box", style="filled,rounded",
                     fillcolor=PALETTE[0], fontname="Helvetica", fontsize="9")
    return dot.source
