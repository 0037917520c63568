"""The ``cudagraphs`` view: the verdict, the coverage line, then each finding as a diagnostic.

Findings read like a compiler's (ruff, rustc), one block each, readable at 80 columns::

    examples/cpu_roundtrip.py:13:9: CG002 skipping cudagraphs due to cpu device (_tensor_constant0)
       |
    13 |         c = torch.tensor(2.0)
       |         ^^^^^^^^^^^^^^^^^^^^^
       = region 0 forward
       = help: create tensors on the input's device ...

Skips first, then graph-partition splits and the partitions, then run-time risks and notes between
regions. Paths are relative to the current folder when under it, and a ``file:line`` is never cut.
"""

from __future__ import annotations

from rich.console import Group
from rich.text import Text

from graphtool.display_paths import display_path
from graphtool.render.diagnostics import DiagnosticView, Hanging

_SECTIONS = (
    ("skip", "why CUDA graphs would be skipped", "finding"),
    ("split", "where graph partitioning would split the graph", "warning"),
    ("risk", "run-time risks (only a run on a GPU can tell)", "note"),
    ("graph-note", "graphs torch runs without a CUDA graph, no skip (nothing to graph)", "note"),
    ("note", "between regions", "note"),
)


def _section(r) -> str:
    """Which section a finding goes in: a note about one graph (CG037) apart from the notes between regions."""
    kind = r.kind or ("skip" if r.skips else "note")
    return "graph-note" if r.kind == "note" and r.region is not None else kind


def _scope(r) -> str:
    if r.region is None:
        return "between regions" if r.kind == "note" else "whole model"
    return f"region {r.region} {r.graph or ''}".rstrip()


def diagnostic(r) -> DiagnosticView:
    """One finding in the format of every other diagnostic (``path:line:col: CODE message``, the source
    line in a gutter with the span underlined, ``help:``), where it applies and torch's silence as notes."""
    from graphtool.analysis.diagnostics import cudagraph_finding

    return DiagnosticView(cudagraph_finding(r), notes=(("", _scope(r)), ("silent", r.silent)))


def _partitions(verdict) -> list:
    out = []
    graphs: dict = {}
    for p in verdict.partitions:
        graphs.setdefault((p.region, p.graph), []).append(p)
    for (region, graph), parts in graphs.items():
        if len(parts) < 2:
            continue
        inside = sum(p.cudagraphed for p in parts)
        out.append(Text(f"region {region} {graph}: {inside} of {len(parts)} partitions CUDA-graphed"))
        for p in parts:
            where = f" at {display_path(p.source.file)}:{p.source.line}" if p.source else ""
            state = "CUDA graph" if p.cudagraphed else f"outside ({p.reason})"
            out.append(Hanging(f"  #{p.index}: ", f"{p.ops} op{'s' if p.ops != 1 else ''}, {state}, from {p.op}{where}",
                               rest="      "))
    return out


def _steady(steady) -> list:
    """The loop's steps: the summary (loud when it keeps growing), each step, each recompile in torch's words."""
    if steady is None:
        return []
    good = steady.steady_from is not None and not steady.failed
    out: list = [Text(f"steady state {steady.summary()}", style="verdict" if good else "verdict.bad")]
    for f in steady.per_step:
        out.append(Text("  " + steady.step_line(f)))
        for r in f.recompiles:
            where = f" ({display_path(r.file)}:{r.line})" if r.file else ""
            out.append(Text(f"    recompiled {r.function}{where}: {r.reason}"))
    return out


def cudagraphs_view(verdict, stopped: str | None = None) -> Group:
    style = "verdict.ok" if verdict.eligible else "verdict.bad"
    label = " (predicted from a stand-in trace; not yet confirmed on a GPU)" if verdict.predicted else ""
    parts: list = [Text(verdict.summary() + label, style=style)]
    if verdict.partitions:
        parts.append(Text(verdict.coverage_line(), style="verdict"))
    parts += _steady(getattr(verdict, "steady", None))
    if stopped:
        parts.append(Text(f"note: {stopped}", style="note"))
    for kind, title, style in _SECTIONS:
        found = [r for r in verdict.reasons if _section(r) == kind]
        if not found and not (kind == "split" and _partitions(verdict)):
            continue
        parts.append(Text(""))
        parts.append(Text(f"{title}:", style=style))
        for r in found:
            parts.append(diagnostic(r))
        if kind == "split":
            parts += _partitions(verdict)
    return Group(*parts)
