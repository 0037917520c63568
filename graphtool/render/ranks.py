"""The per-rank lines of the ``--ddp`` view: which ranks compile which graphs, and why one differs.

Readable at 80 columns::

    ranks: 2 different compiles among 4 ranks
      ranks 0-2: 2 graphs, 0 graph breaks
      rank 3: 2 graphs, 0 graph breaks
        rank 3's input 'x' is 3x512 (rank 0's 4x512): it compiles its own
        graphs; dynamo's guard: tensor 'x' size mismatch at index 0.
        expected 4, actual 3
"""

from __future__ import annotations

import textwrap

from rich.text import Text

from graphtool.render.tables import wrapped


def _ranks(ranks) -> str:
    ranks = list(ranks)
    if len(ranks) > 2 and ranks == list(range(ranks[0], ranks[-1] + 1)):
        return f"ranks {ranks[0]}-{ranks[-1]}"
    return ("rank " if len(ranks) == 1 else "ranks ") + ", ".join(str(r) for r in ranks)


def ranks_lines(report, width: int = 78) -> list[Text]:
    """Nothing but a line when every rank compiles the same graphs; else one line per group of ranks
    and its reasons, wrapped at ``width``. The notes follow, dimmed."""
    if report.same:
        lines = [Text(f"  ranks: every rank compiles the same graphs ({len(report.built)} of "
                      f"{report.world_size} built, {len(report.traced)} traced)", style="bold")]
    else:
        lines = [Text(f"  ranks: {len(report.groups)} different compiles among {report.world_size} ranks", style="bold")]
        for g in report.groups:
            n, b = g.graphs, len(g.graph_breaks)
            lines.append(Text(f"    {_ranks(g.ranks)}: {n} graph{'s' if n != 1 else ''}, "
                              f"{b} graph break{'s' if b != 1 else ''}"))
            for why in g.why:
                lines.extend(Text(w, style="yellow") for w in
                             textwrap.wrap(why, width=width, initial_indent="      ", subsequent_indent="      "))
    for note in report.notes:
        lines.extend(wrapped(note, width, "  note: ", "        ", "dim"))
    return lines
