"""The ``--ddp`` view: the graphs DDP's optimizer splits off, one line each, then the other caps.

Readable at 80 columns::

    under DDP (8 ranks, bucket_cap_mb=25): 2 graphs from 1 dynamo graph
      region 0: bucket 0, 14 params, 7.0 MB, module 0 at m.py:12
      region 1: bucket 1, 2 params, 1.0 MB, module 7 at m.py:12
      graphs at bucket_cap_mb 1: 8, 5: 3, 10: 2, 25: 2, 50: 2, 100: 2
      note: ...
"""

from __future__ import annotations

import textwrap

from rich.console import Group
from rich.text import Text

from graphtool.display_paths import display_path

_MB = 1024 * 1024


def ddp_view(report, width: int = 78) -> Group:
    """One line per split graph (its user line apart when the line would pass ``width``), the graph
    count at other caps, then the notes wrapped at ``width``."""
    lines = [Text(
        f"{'under DDP' if report.wrapper.startswith('DDP') else report.wrapper} ({report.world_size} rank{'s' if report.world_size != 1 else ''}, "
        f"bucket_cap_mb={report.bucket_cap_mb:g}): {report.graph_count} graph{'s' if report.graph_count != 1 else ''} "
        f"from {report.dynamo_graphs} dynamo graph{'s' if report.dynamo_graphs != 1 else ''}",
        style="bold",
    )]
    for g in report.graphs:
        line = f"  region {g.region}: bucket {g.bucket}, {len(g.params)} params, {g.bytes / _MB:.1f} MB"
        if g.module:
            line += f", module {g.module}"
        where = f"{display_path(g.source.file)}:{g.source.line}" if g.source else ""
        if where and len(line) + len(where) + 4 <= width:
            line, where = f"{line} at {where}", ""
        lines.append(Text(line))
        if where:
            lines.append(Text(f"    at {where}"))
    if report.graphs_at:
        caps = ", ".join(f"{cap:g}: {n}" for cap, n in report.graphs_at)
        lines.append(Text(f"  graphs at bucket_cap_mb {caps}"))
    for c in report.collectives:
        size = f", {c.bytes} bytes" if c.bytes is not None else ""
        lines.append(Text(f"  region {c.region} {c.graph}: {c.op} (group {c.group}{size})"))
    for note in report.notes:
        wrapped = textwrap.wrap(note, width=width, initial_indent="  note: ", subsequent_indent="        ")
        lines.extend(Text(w, style="dim") for w in wrapped)
    if getattr(report, "ranks", None) is not None:
        from graphtool.render.ranks import ranks_lines

        lines.extend(ranks_lines(report.ranks, width))
    return Group(*lines)
