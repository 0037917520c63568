"""What one rank holds (``memory --ddp``), one line per kind of bytes, readable at 80 columns::

    per rank under DDP (8 ranks): 24.1 MiB
      parameters         8.0 MiB
      gradients          8.0 MiB
      DDP buckets        8.0 MiB
      ...

Under FSDP2 (``memory --fsdp2``) the ranks can differ, so one row per rank (ranks that hold the same
bytes share a row: ``1-6``)::

    per rank under FSDP2 (8 ranks): up to 12.1 MiB (rank 0)
      ranks      params      grads  optimizer  activations all-gather*      total
      0-7       2.0 MiB    2.0 MiB          -     96.0 KiB     8.0 MiB   12.1 MiB
"""

from __future__ import annotations

from rich.console import Group
from rich.text import Text

from graphtool.render.tables import wrapped


def rank_memory_view(rank, *, world_size: int | None = None, width: int = 78, wrapper: str = "DDP") -> Group:
    from graphtool.analysis.memory.saved import format_bytes

    ranks = f" ({world_size} rank{'s' if world_size != 1 else ''})" if world_size else ""
    if rank.per_rank:
        lines = _per_rank(rank, wrapper, ranks)
    else:
        lines = [Text(f"per rank under {wrapper}{ranks}: {format_bytes(rank.total_bytes)}", style="bold")]
        rows = (("parameters", rank.params_bytes), ("gradients", rank.grads_bytes), ("DDP buckets", rank.bucket_bytes),
                ("optimizer state", rank.optimizer_bytes), ("activations", rank.activations_bytes))
        if rank.allgather_bytes:
            rows += (("all-gathered", rank.allgather_bytes),)
        for name, n in rows:
            lines.append(Text(f"  {name:<18} {format_bytes(n):>12}"))
    for note in rank.notes:
        lines.extend(wrapped(note, width, "  note: ", "        ", "dim"))
    return Group(*lines)


def _per_rank(rank, wrapper: str, ranks: str) -> list:
    """The head line, then one row per run of ranks holding the same bytes."""
    from graphtool.analysis.memory.saved import format_bytes

    lines = [Text(f"per rank under {wrapper}{ranks}: up to {format_bytes(rank.total_bytes)} (rank {rank.rank})",
                  style="bold")]
    lines.append(Text(f"  {'ranks':<7} {'params':>10} {'grads':>10} {'optimizer':>10} {'activations':>12} "
                      f"{'all-gather*':>11} {'total':>10}"))
    runs: list[list] = []  # [first rank's RankMemory, last rank]
    for r in rank.per_rank:
        same = runs and runs[-1][0].to_dict() | {"rank": r.rank} == r.to_dict()
        if same:
            runs[-1][1] = r.rank
        else:
            runs.append([r, r.rank])
    for r, last in runs:
        label = str(r.rank) if r.rank == last else f"{r.rank}-{last}"
        opt = format_bytes(r.optimizer_bytes) if r.optimizer_bytes else "-"
        lines.append(Text(f"  {label:<7} {format_bytes(r.params_bytes):>10} {format_bytes(r.grads_bytes):>10} {opt:>10} "
                          f"{format_bytes(r.activations_bytes):>12} {format_bytes(r.allgather_bytes):>11} "
                          f"{format_bytes(r.total_bytes):>10}"))
    return lines
