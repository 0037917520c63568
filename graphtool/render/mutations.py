"""The ``mutations`` view: one line of verdict, then each mutation and alias as a diagnostic
(``path:line:col: GT-M001 buffer bn.running_mean mutated in place``); ``--all`` adds every input."""

from __future__ import annotations

from rich.console import Group
from rich.text import Text

from graphtool.render.diagnostics import diagnostics_view
from graphtool.render.tables import Col, FitTable, where


def _flags(m) -> str:
    kinds = [k for k, on in (("data", m.mutates_data), ("metadata", m.mutates_metadata), ("storage", m.mutates_storage)) if on]
    text = ", ".join(kinds) or "-"
    if m.under_no_grad:
        text += " (under no_grad)"
    return text


def mutations_view(report, *, show_all: bool = False, allowed=(), accept=None) -> Group:
    """``allowed``: names ``--allow`` accepted; they are listed, not counted as findings. ``accept``
    writes how to accept a mutation (the CLI's ``--allow`` unless the Python API passes its ``allow=``)."""
    from graphtool.analysis.diagnostics import cli_allow, mutation_diagnostics

    parts = [Text(report.verdict(), style="verdict")]
    if show_all and report.inputs:
        rows = [(m.name, m.kind, _flags(m), where(m.source) if m.source else (m.note or "-"), ",".join(map(str, m.regions)))
                for m in report.inputs]
        cols = [Col("input", ident=True), Col("kind", drop=2), Col("mutates"), Col("where", ident=True, drop=3), Col("regions", drop=1)]
        parts.append(FitTable("inputs", cols, rows))
    from graphtool.analysis.mutations import is_allowed

    accepted = [m for m in report.mutated if is_allowed(m, allowed)] if allowed else []
    if accepted:
        from graphtool.analysis.diagnostics import some_names
        from graphtool.analysis.mutations import optimizer_summary

        said = [optimizer_summary([m for m in accepted if m.by_optimizer]), some_names([m.name for m in accepted if not m.by_optimizer])]
        parts.append(Text(f"accepted by --allow {' '.join(allowed)}: {'; '.join(s for s in said if s)}", style="note"))
    diags = mutation_diagnostics(report, skip={m.name for m in accepted}, accept=accept or cli_allow)
    if diags:
        parts.append(diagnostics_view(diags, headers=False))
    return Group(*parts)
