"""Rich renderables for ``graphtool trace``."""

from __future__ import annotations

from rich.console import Group
from rich.table import Table
from rich.text import Text

from graphtool.render.tables import row

TOP_OPS = 8


def trace_view(report) -> Group:
    parts = [_header(report)]
    for b in report.breaks:
        where = f"{b.file}:{b.line}" if b.file else "unknown location"
        parts.append(Text(f"graph break at {where}: {b.reason}", style="warning"))
    for region in report.regions:
        parts.append(_region_table(region, len(report.regions)))
        if region.forward is not None:
            parts.append(_placeholder_table(region.forward, "forward inputs"))
    if report.no_graph:
        parts.append(Text(f"torch.compile captured no graph: {report.no_graph}", style="verdict.bad"))
    parts.append(Text(f"mutations: {report.mutations.verdict()}", style="verdict"))
    return Group(*parts)


def _header(report) -> Text:
    mode = "training" if report.training else "inference"
    n = len(report.regions)
    return Text.assemble(
        (f"{report.path}", "header"),
        f"  entry {report.entry}  device {report.device}  {mode}  {report.backend}'s graphs  torch {report.torch_version}\n",
        f"{n} compiled region{'s' if n != 1 else ''}, {len(report.breaks)} graph break"
        f"{'s' if len(report.breaks) != 1 else ''}",
    )


def _region_table(region, total: int) -> Table:
    title = f"region {region.index}" if total > 1 else "graphs"
    table = Table(title=title, title_justify="left")
    table.add_column("graph")
    table.add_column("nodes", justify="right")
    table.add_column("inputs")
    table.add_column("top ops")
    for g in (region.forward, region.backward):
        if g is None:
            continue
        kinds: dict[str, int] = {}
        for p in g.placeholders:
            kinds[p.kind] = kinds.get(p.kind, 0) + 1
        inputs = ", ".join(f"{n} {k}" for k, n in kinds.items())
        ops = ", ".join(f"{op.replace('aten.', '')} x{n}" for op, n in list(g.ops.items())[:TOP_OPS])
        row(table, g.kind, str(g.nodes), inputs, ops)
    return table


def _placeholder_table(graph, title: str) -> Table:
    table = Table(title=title, title_justify="left")
    for col in ("placeholder", "kind", "name", "shape", "dtype", "device"):
        table.add_column(col)
    for p in graph.placeholders:
        shape = ("x".join(str(s) for s in p.shape) or "scalar") if p.shape is not None else "-"
        row(table, p.graph_name, p.kind, p.name, shape, p.dtype or "-", p.device or "-")
    return table
