"""The ``graphtool bench`` table."""

from __future__ import annotations

from rich.console import Group
from rich.table import Table
from rich.text import Text

from graphtool.render.tables import row


def _mib(n) -> str:
    return f"{n / 2**20:.1f}" if n is not None else "-"


def bench_view(report) -> Group:
    what = "forward + backward" if report.backward else "forward"
    table = Table(
        title=f"{report.path} ({what}, {report.device}; {report.repeat} x {report.iters} iterations after {report.warmup} warm-up)",
        title_justify="left",
    )
    memory = any(m.peak_memory_bytes is not None for m in report.modes)  # CUDA only
    pool = any(m.pool_bytes is not None for m in report.modes)
    table.add_column("mode", no_wrap=True)
    table.add_column("status", no_wrap=True)
    cols = ["median ms", "min-max ms", "spread", "speedup"] + ["peak MiB"] * memory + ["pool MiB"] * pool
    for col in cols:
        table.add_column(col, justify="right", no_wrap=True)
    for m in report.modes:
        s = m.stats
        row(table,
            m.name,
            Text(m.status, style="status.ok" if m.status == "ok" else "status.bad" if m.status in ("mismatch", "error") else "status.skipped"),
            f"{s.median_ms:.4f}" if s else "-",
            f"{s.min_ms:.4f}-{s.max_ms:.4f}" if s else "-",
            f"{s.spread_pct:.1f}%" if s else "-",
            f"{m.speedup:.2f}x" if m.speedup else "-",
            *([_mib(m.peak_memory_bytes)] if memory else []),
            *([_mib(m.pool_bytes)] if pool else []),
        )
    parts = [table]
    for m in report.modes:
        if m.reason:
            parts.append(Text(f"{m.name}: {m.reason}", style="note" if m.status == "skipped" else "finding"))
    if report.verdict and report.verdict.get("reasons"):
        from graphtool.analysis.cudagraphs import EAGER_CAPTURE_BLOCKERS

        parts.append(Text(f"CUDA-graph verdict: {report.verdict.get('summary')}", style="verdict"))
        for r in report.verdict["reasons"]:
            where = f"{r['source']['file']}:{r['source']['line']}" if r.get("source") else "-"
            effect = ("stops graphtool's capture" if r["code"] in EAGER_CAPTURE_BLOCKERS
                      else f"{report.verdict['backend']} skips" if r["skips"] else "note")
            parts.append(Text(f"  {where}: [{effect}] {r['message']}"))
    return Group(*parts)
