"""A graph's pictures for a page (``graphtool report``'s and ``graphtool log``'s viewer): the graph drawn at each fold
level and laid out as SVG, a level whose layout takes too long left out and said so, and none at all where no Graphviz
layout program is found.

Example::

    >>> lay_out = Layout(timeout=30.0)
    >>> lay_out.notes, lay_out.missing
    ([], False)
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Optional

#: pictures with more boxes than this are not laid out: their layout would take seconds, their page megabytes
FULL_LIMIT = 1000
#: seconds one picture's layout may take before it is left out (the page then says so): report's and log's default
LAYOUT_TIMEOUT = 30.0


@dataclass(frozen=True)
class Level:
    """One fold level of one graph, laid out."""

    name: str  # "modules at depth 2", "by source line", "every node"
    depth: Optional[int]  # None: every node
    svg: str
    boxes: int
    members: dict  # node id folded away -> the box that holds it


@dataclass(frozen=True)
class Picture:
    """One AOT graph of one compiled region, laid out at each level, with what a click on each node shows."""

    region: int
    graph: str  # forward | backward
    nodes: int  # the graph's nodes, counted as trace and devices count them (len(graph.nodes))
    edges: int
    levels: tuple[Level, ...]
    default: int  # the level shown first
    facts: dict  # node id -> what a click shows
    drawn: int = 0  # the picture's nodes: the graph's, less the output node, plus one marker per value returned


class Layout:
    """Lays out pictures, giving up on one that takes longer than ``timeout`` seconds (``flag``: the option that sets it,
    named in the note) and on all when no layout program exists; ``notes`` says what was left out."""

    def __init__(self, timeout: float, flag: Optional[str] = None):
        self.timeout, self.flag = timeout, flag
        self.notes: list[str] = []
        self.missing = False

    def __call__(self, drawing, name: str, depth: Optional[int], members: dict, what: str) -> Optional[Level]:
        from graphtool.errors import RendererMissing, UsageError
        from graphtool.render.dot import to_dot
        from graphtool.render.report import layout_svg

        if self.missing:
            return None
        # the page shows a node's facts on click: tooltips (folded boxes get them too) would only add bytes
        drawing = replace(drawing, nodes=tuple(replace(n, tooltip=None) for n in drawing.nodes))
        try:
            svg = layout_svg(to_dot(drawing, legend=False), timeout=self.timeout)
        except RendererMissing:
            self.missing = True
            self.notes.append("no Graphviz layout program was found, so the page has no pictures "
                              "(install Graphviz, or pip install graphviz-pure)")
            return None
        except UsageError as exc:
            why = (f"its layout took longer than {self.timeout:g} s" + (f" ({self.flag})" if self.flag else "")
                   if "took longer" in exc.message else exc.message)
            self.notes.append(f"{what}, {name}: not drawn: {why}")
            return None
        return Level(name, depth, svg, len(drawing.nodes), members)


def fx_pictures(capture, accel: str, lay_out: Layout, progress, show_device=None) -> tuple[list[Picture], dict]:
    """Each forward and backward graph of ``capture`` drawn (its nodes marked where a GPU run would trip, ``accel`` the
    main device) and laid out at every fold level; and the marks, per (region, graph)."""
    from graphtool.analysis.drawing import fx_drawing, fx_highlights
    from graphtool.analysis.node_facts import graph_facts
    from graphtool.capture.user.script import is_module

    model = capture.spec.model
    classes = {n: type(m).__name__ for n, m in model.named_modules()} if is_module(model) else {}
    pictures, marks = [], {}
    for region in capture.regions:
        for kind, gm in (("forward", region.forward), ("backward", region.backward)):
            if gm is None:
                continue
            highlights = fx_highlights(region, kind)
            marks[(region.index, kind)] = highlights
            drawing = fx_drawing(gm, kind, region, highlights=highlights, classes=classes, main_device=accel)
            levels, default = fold_levels(drawing, f"region {region.index} {kind}", lay_out, progress)
            if not levels:
                continue
            pictures.append(Picture(region.index, kind, len(gm.graph.nodes), len(drawing.edges), tuple(levels), default,
                                    graph_facts(gm, kind, region, show_device), drawn=len(drawing.nodes)))
    return pictures, marks


def fold_levels(drawing, what: str, lay_out: Layout, progress) -> tuple[list[Level], int]:
    """Every distinct fold level by module, shallowest first, then every node (when small enough); and the one shown
    first."""
    from graphtool.analysis.drawing import opening_depth
    from graphtool.analysis.node_facts import fold_level

    deepest = max((len(n.module) for n in drawing.nodes), default=0)
    levels: list[Level] = []
    seen: set[frozenset] = set()
    for depth in range(1, deepest + 1):
        folded, members = fold_level(drawing, depth)
        ids = frozenset(n.id for n in folded.nodes)
        if ids in seen or len(folded.nodes) == len(drawing.nodes) or len(folded.nodes) > FULL_LIMIT:
            continue
        seen.add(ids)
        progress.phase(f"laying out {what}: modules at depth {depth} ({len(folded.nodes)} boxes)...")
        level = lay_out(folded, f"modules at depth {depth}", depth, members, what)
        if level is not None:
            levels.append(level)
    if len(drawing.nodes) <= FULL_LIMIT:
        progress.phase(f"laying out {what}: every node ({len(drawing.nodes)})...")
        level = lay_out(drawing, "every node", None, {}, what)
        if level is not None:
            levels.append(level)
    elif not levels:
        lay_out.notes.append(f"{what}: {len(drawing.nodes)} nodes and no fold by module: too large to draw")
    if not levels:
        return levels, 0
    best = opening_depth(drawing)
    if best is None and levels[-1].depth is None:  # small enough to read whole
        return levels, len(levels) - 1
    best = best or 1
    shallower = [i for i, lv in enumerate(levels) if lv.depth is not None and lv.depth <= best]
    return levels, shallower[-1] if shallower else 0

