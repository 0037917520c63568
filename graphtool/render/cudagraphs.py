"""The ``cudagraphs`` view: the verdict, then each reason with its region, graph, line and fix."""

from __future__ import annotations

from rich.console import Group
from rich.table import Table
from rich.text import Text

from graphtool.render.tables import row, where


def cudagraphs_view(verdict, stopped: str | None = None) -> Group:
    style = "verdict.ok" if verdict.eligible else "verdict.bad"
    label = " (predicted from a stand-in trace; not yet confirmed on a GPU)" if verdict.predicted else ""
    parts = [Text(verdict.summary() + label, style=style)]
    if stopped:
        parts.append(Text(f"note: {stopped}", style="note"))
    if verdict.reasons:
        table = Table(title="findings", title_justify="left")
        for col in ("code", "region", "graph", "skips", "where", "message", "fix"):
            table.add_column(col, overflow="fold")
        for r in verdict.reasons:
            row(table,
                r.code,
                "-" if r.region is None else str(r.region),
                r.graph or "-",
                "yes" if r.skips else "no",
                where(r.source),
                r.message,
                r.fix,
            )
        parts.append(table)
    return Group(*parts)
