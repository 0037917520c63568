"""The ``graphtool bench`` table.

Numbers and headers are never cut: the table is a :class:`~graphtool.render.tables.FitTable`, which at
a narrow width drops the min-max and memory columns (``--format json`` has them) before it would
shorten a figure.
"""

from __future__ import annotations

from rich.console import Group
from rich.text import Text

from graphtool.display_paths import display_path
from graphtool.render.tables import Col, FitTable


def _mib(n) -> str:
    return f"{n / 2**20:.1f}" if n is not None else "-"


def _status(status: str) -> Text:
    style = ("status.ok" if status == "ok" else "status.bad" if status in ("mismatch", "error")
             else "warning" if status == "unchecked" else "status.skipped")
    return Text(status, style=style)


def _spread(m, limit: float) -> Text:
    if not m.stats:
        return Text("-")
    text = f"{m.stats.spread_pct:.1f}%"
    return Text(text + " !", style="warning") if m.noisy(limit) else Text(text)


def bench_view(report) -> Group:
    what = ("training step: its own backward and optimizer" if report.own_step else
            "forward + backward" if report.backward else "forward")
    header = Text(f"{display_path(report.path)} (timed: {what}, {report.device}; "
                  f"{report.repeat} x {report.iters} iterations after {report.warmup} warm-up)", style="header")
    memory = any(m.peak_memory_bytes is not None for m in report.modes)  # CUDA only
    pool = any(m.pool_bytes is not None for m in report.modes)
    limit = report.spread_limit_pct
    cols = [Col("mode", ident=True), Col("status"), Col("median ms", ident=True, justify="right"),
            Col("min-max ms", ident=True, drop=1, justify="right"), Col("spread", ident=True, justify="right"),
            Col("speedup", ident=True, justify="right")]
    cols += [Col("peak MiB", ident=True, drop=3, justify="right")] * memory + [Col("pool MiB", ident=True, drop=2, justify="right")] * pool
    rows = []
    for m in report.modes:
        s = m.stats
        rows.append((
            m.name,
            _status(m.status),
            f"{s.median_ms:.4f}" if s else "-",
            f"{s.min_ms:.4f}-{s.max_ms:.4f}" if s else "-",
            _spread(m, limit),
            f"{m.speedup:.2f}x" if m.speedup else "-",
            *([_mib(m.peak_memory_bytes)] if memory else []),
            *([_mib(m.pool_bytes)] if pool else []),
        ))
    parts = [header, *([Text(f"timed: {report.timed_why}", style="note")] if report.timed_why and not report.own_step else []),
             FitTable(None, cols, rows)]
    for w in report.warnings():
        parts.append(Text(f"warning: {w}", style="warning"))
    note = report.random_ops_note()
    if note:
        parts.append(Text(f"random ops: {note}", style="note"))
    for m in report.modes:
        if m.reason:
            parts.append(Text(f"{m.name}: {m.reason}", style="finding" if m.status in ("mismatch", "error", "unchecked") else "note"))
    for insight in report.insights():
        parts.append(Text(f"insight: {insight['text']}", style="note"))
    if report.verdict and report.verdict.get("reasons"):
        from graphtool.analysis.cudagraphs.verdict import EAGER_CAPTURE_BLOCKERS

        parts.append(Text(f"CUDA-graph verdict: {report.verdict.get('summary')}", style="verdict"))
        for r in report.verdict["reasons"]:
            where = f"{display_path(r['source']['file'])}:{r['source']['line']}" if r.get("source") else "-"
            effect = ("stops graphtool's capture" if r["code"] in EAGER_CAPTURE_BLOCKERS
                      else f"{report.verdict['backend']} skips" if r["skips"] else "note")
            parts.append(Text(f"  {where}: [{effect}] {r['message']}"))
    return Group(*parts)
