"""The ``--ddp`` view: the graphs DDP's optimizer splits off, one line each, then the other caps.

Readable at 80 columns::

    DDP(torch.compile(model)), bucket_cap_mb=25, world size 8: 2 graphs (1 dynamo graph)
      region 0: bucket 0, 14 params, 7.0 MB, from module 0 (m.py:12)
      region 1: bucket 1, 2 params, 1.0 MB, from module 7
      graphs at bucket_cap_mb 1: 8, 5: 3, 10: 2, 25: 2, 50: 2, 100: 2
      note: ...
"""

from __future__ import annotations

from rich.console import Group
from rich.text import Text

from graphtool.display_paths import display_path

_MB = 1024 * 1024


def ddp_view(report) -> Group:
    lines = [Text(
        f"DDP(torch.compile(model)), bucket_cap_mb={report.bucket_cap_mb:g}, world size {report.world_size}: "
        f"{report.graph_count} graph{'s' if report.graph_count != 1 else ''} "
        f"({report.dynamo_graphs} dynamo graph{'s' if report.dynamo_graphs != 1 else ''})",
        style="bold",
    )]
    for g in report.graphs:
        where = f", from module {g.module}" if g.module else ""
        if g.source:
            where += f" ({display_path(g.source.file)}:{g.source.line})"
        lines.append(Text(f"  region {g.region}: bucket {g.bucket}, {len(g.params)} params, "
                          f"{g.bytes / _MB:.1f} MB{where}"))
    if report.graphs_at:
        caps = ", ".join(f"{cap:g}: {n}" for cap, n in report.graphs_at)
        lines.append(Text(f"  graphs at bucket_cap_mb {caps}"))
    for c in report.collectives:
        size = f", {c.bytes} bytes" if c.bytes is not None else ""
        lines.append(Text(f"  region {c.region} {c.graph}: {c.op} (group {c.group}{size})"))
    for note in report.notes:
        lines.append(Text(f"  note: {note}", style="dim"))
    return Group(*lines)
