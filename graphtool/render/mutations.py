"""The ``mutations`` view: mutated inputs (how, where, which region) and aliased outputs."""

from __future__ import annotations

from rich.console import Group
from rich.table import Table
from rich.text import Text

from graphtool.render.tables import row, where


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
            place = where(m.source) if m.source else (m.note or "-")
            row(table, m.name, m.kind, _flags(m), place, ",".join(map(str, m.regions)))
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
