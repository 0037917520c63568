"""Table cells as literal text (user names such as ``inputs[0]`` or ``compile[aot_eager]`` must not be
read as rich markup), and tables that fit the console without cutting an identifier.

:class:`FitTable` is laid out at render time, when the width is known: identifier columns (FQNs,
paths, ``file:line``) are never truncated or split; when the table does not fit, optional columns
are dropped (least useful first), and when it still does not fit each row is stacked as
``column: value`` lines.
"""

from __future__ import annotations

from dataclasses import dataclass

from rich.console import Console, ConsoleOptions, RenderResult
from rich.table import Table
from rich.text import Text


def cell(value) -> Text:
    return value if isinstance(value, Text) else Text(str(value))


def row(table, *values) -> None:
    table.add_row(*(cell(v) for v in values))


def where(source) -> str:
    """A ``Source`` as ``path:line`` (the path relative to the current folder when under it), else ``-``."""
    from graphtool.display_paths import display_path

    return f"{display_path(source.file)}:{source.line}" if source else "-"


@dataclass(frozen=True)
class Col:
    """One column: ``ident`` cells are never cut; ``drop`` ranks optional columns (1 goes first)."""

    name: str
    ident: bool = False
    drop: int | None = None
    justify: str = "left"


def _longest_line(text: str) -> int:
    return max((len(ln) for ln in text.splitlines()), default=0)


def _words(text: str) -> int:
    return max((len(w) for w in text.split()), default=0)


class FitTable:
    """A table laid out at the console's width: identifiers whole, optional columns dropped, then rows stacked."""

    def __init__(self, title: str | None, columns: list[Col], rows: list[tuple]):
        self.title = title
        self.columns = columns
        self.rows = [tuple(cell(v) for v in r) for r in rows]

    def _min_width(self, idx: list[int]) -> int:
        """The narrowest this table can be with columns ``idx``: identifiers whole, other cells one word a line."""
        total = 1 + 3 * len(idx)  # rich's box: a border per column and one padding space each side
        for i in idx:
            col = self.columns[i]
            cells = [r[i].plain for r in self.rows] + [col.name]
            total += max(_longest_line(c) for c in cells) if col.ident else max(_words(c) for c in cells)
        return total

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        width = options.max_width
        idx = list(range(len(self.columns)))
        droppable = sorted((c.drop, i) for i, c in enumerate(self.columns) if c.drop is not None)
        while self._min_width(idx) > width and droppable:
            idx.remove(droppable.pop(0)[1])
        if self._min_width(idx) > width:
            yield from self._stacked()
            return
        table = Table(title=self.title, title_justify="left")
        for i in idx:
            c = self.columns[i]
            if c.ident:
                longest = max([_longest_line(r[i].plain) for r in self.rows] + [len(c.name)])
                table.add_column(c.name, justify=c.justify, no_wrap=True, min_width=longest)
            else:
                table.add_column(c.name, justify=c.justify, overflow="fold")
        for r in self.rows:
            table.add_row(*(r[i] for i in idx))
        dropped = [c.name for i, c in enumerate(self.columns) if i not in idx]
        yield table
        if dropped:
            yield Text(f"(narrow console: {', '.join(dropped)} not shown; --format json has everything)", style="note")

    def _stacked(self) -> RenderResult:
        if self.title:
            yield Text(self.title, style="table.title")
        for r in self.rows:
            first = True
            for c, v in zip(self.columns, r):
                t = Text.assemble(("- " if first else "  "), (f"{c.name}: ", "bold"), v)
                t.no_wrap, t.overflow = True, "fold"
                first = False
                yield t
