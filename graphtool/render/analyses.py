"""Rich renderables for ``mutations``, ``devices`` and ``cudagraphs``."""

from __future__ import annotations

from rich.console import Group
from rich.table import Table
from rich.text import Text


def _src(source) -> str:
    return f"{source.file}:{source.line}" if source else "-"


def _flags(m) -> str:
    kinds = [k for k, on in (("data", m.mutates_data), ("metadata", m.mutates_metadata), ("storage", m.mutates_storage)) if on]
    text = ", ".join(kinds) or "-"
    if m.under_no_grad:
        text += " (under no_grad)"
    return text


def mutations_view(report, *, show_all: bool = False) -> Group:
    rows = report.inputs if show_all else report.mutated
    parts = [Text(report.verdict(), style="bold")]
    if rows:
        table = Table(title="inputs" if show_all else "mutated inputs", title_justify="left")
        for col in ("input", "kind", "mutates", "where", "regions"):
            table.add_column(col)
        for m in rows:
            where = _src(m.source) if m.source else (m.note or "-")
            table.add_row(m.name, m.kind, _flags(m), where, ",".join(map(str, m.regions)))
        parts.append(table)
    aliased = report.outputs if show_all else report.aliased_outputs
    if aliased:
        table = Table(title="outputs", title_justify="left")
        for col in ("region", "output", "aliasing", "view", "of"):
            table.add_column(col)
        for o in aliased:
            of = f"{o.alias_of['kind']} {o.alias_of['name']}" if o.alias_of else "-"
            table.add_row(str(o.region), str(o.index), o.alias_type, "yes" if o.is_view else "no", of)
        parts.append(table)
    for a in report.input_aliases:
        parts.append(Text(f"inputs {', '.join(a.names)}: {a.relation.replace('_', ' ')}"))
    return Group(*parts)
