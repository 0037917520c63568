"""What one rank holds (``memory --ddp``), one line per kind of bytes, readable at 80 columns::

    per rank under DDP (8 ranks): 24.1 MiB
      parameters         8.0 MiB
      gradients          8.0 MiB
      DDP buckets        8.0 MiB
      ...
"""

from __future__ import annotations

import textwrap

from rich.console import Group
from rich.text import Text


def rank_memory_view(rank, *, world_size: int | None = None, width: int = 78) -> Group:
    from graphtool.analysis.memory import format_bytes

    ranks = f" ({world_size} rank{'s' if world_size != 1 else ''})" if world_size else ""
    lines = [Text(f"per rank under DDP{ranks}: {format_bytes(rank.total_bytes)}", style="bold")]
    rows = (("parameters", rank.params_bytes), ("gradients", rank.grads_bytes), ("DDP buckets", rank.bucket_bytes),
            ("optimizer state", rank.optimizer_bytes), ("activations", rank.activations_bytes))
    if rank.allgather_bytes:
        rows += (("all-gathered", rank.allgather_bytes),)
    for name, n in rows:
        lines.append(Text(f"  {name:<18} {format_bytes(n):>12}"))
    for note in rank.notes:
        lines.extend(Text(w, style="dim") for w in textwrap.wrap(note, width=width, initial_indent="  note: ",
                                                                 subsequent_indent="        "))
    return Group(*lines)
