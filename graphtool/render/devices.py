"""The ``devices`` view: nodes off the main device and every cross-device copy."""

from __future__ import annotations

from rich.console import Group
from rich.table import Table
from rich.text import Text

from graphtool.render.tables import row, where


def devices_view(report) -> Group:
    parts = [Text(report.verdict(), style="verdict")]
    table = Table(title="nodes per device", title_justify="left")
    for col in ("region", "graph", "devices"):
        table.add_column(col)
    for g in report.graphs:
        row(table, str(g.region), g.graph, ", ".join(f"{d}: {n}" for d, n in g.counts.items()))
    parts.append(table)
    off = [(g, n) for g in report.graphs for n in g.off_device]
    if off:
        t = Table(title=f"nodes off {report.main_device}", title_justify="left")
        for col in ("region", "graph", "node", "op", "device", "where"):
            t.add_column(col)
        for g, n in off:
            row(t, str(g.region), g.graph, n.name, n.op, n.device, where(n.source))
        parts.append(t)
    copies = [(g, c) for g in report.graphs for c in g.copies]
    if copies:
        t = Table(title="cross-device copies", title_justify="left")
        for col in ("region", "graph", "node", "from", "to", "where"):
            t.add_column(col)
        for g, c in copies:
            row(t, str(g.region), g.graph, c.name, c.src_device, c.dst_device, where(c.source))
        parts.append(t)
    return Group(*parts)
