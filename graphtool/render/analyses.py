"""Rich renderables for ``mutations``, ``devices`` and ``cudagraphs``."""

from __future__ import annotations

from rich.console import Group
from rich.table import Table
from rich.text import Text

from graphtool.display_paths import display_path
from graphtool.render.tables import row


def _src(source) -> str:
    return f"{display_path(source.file)}:{source.line}" if source else "-"


def _flags(m) -> str:
    kinds = [k for k, on in (("data", m.mutates_data), ("metadata", m.mutates_metadata), ("storage", m.mutates_storage)) if on]
    text = ", ".join(kinds) or "-"
    if m.under_no_grad:
        text += " (under no_grad)"
    return text


def mutations_view(report, *, show_all: bool = False) -> Group:
    rows = report.inputs if show_all else report.mutated
    parts = [Text(report.verdict(), style="verdict")]
    if rows:
        table = Table(title="inputs" if show_all else "mutated inputs", title_justify="left")
        for col in ("input", "kind", "mutates", "where", "regions"):
            table.add_column(col)
        for m in rows:
            where = _src(m.source) if m.source else (m.note or "-")
            row(table, m.name, m.kind, _flags(m), where, ",".join(map(str, m.regions)))
        parts.append(table)
    aliased = report.model_outputs if show_all else report.aliased_outputs
    if aliased:
        table = Table(title="outputs", title_justify="left")
        for col in ("output", "view", "aliases"):
            table.add_column(col)
        for o in aliased:
            of = "-"
            if o.alias_of:
                of = f"{o.alias_of['kind']} {o.alias_of['name'] or o.alias_of['index'] if o.alias_of['kind'] != 'intermediate' else ''}".rstrip()
            row(table, str(o.index), "yes" if o.is_view else "no", of)
        parts.append(table)
    for a in report.input_aliases:
        parts.append(Text(f"inputs {', '.join(a.names)}: {a.relation.replace('_', ' ')}"))
    return Group(*parts)


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
            row(t, str(g.region), g.graph, n.name, n.op, n.device, _src(n.source))
        parts.append(t)
    copies = [(g, c) for g in report.graphs for c in g.copies]
    if copies:
        t = Table(title="cross-device copies", title_justify="left")
        for col in ("region", "graph", "node", "from", "to", "where"):
            t.add_column(col)
        for g, c in copies:
            row(t, str(g.region), g.graph, c.name, c.src_device, c.dst_device, _src(c.source))
        parts.append(t)
    return Group(*parts)


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
                _src(r.source),
                r.message,
                r.fix,
            )
        parts.append(table)
    return Group(*parts)
