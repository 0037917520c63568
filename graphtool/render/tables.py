"""Table cells as literal text (user names such as ``inputs[0]`` or ``compile[aot_eager]`` must not be
read as rich markup), and tables that fit the console without cutting an identifier.

:class:`FitTable` is laid out at render time, when the width is known: identifier columns (FQNs,
paths, ``file:line``) are never truncated or split; when the table does not fit, optional columns
are dropped (least useful first), and when it still does not fit each row is stacked as
``column: value`` lines.
"""

from __future__ import annotations

import textwrap
from dataclasses import dataclass

from rich.console import Console, ConsoleOptions, RenderResult
from rich.table import Table
from rich.text import Text


def wrapped(text: str, width: int, first: str = "  ", rest: str = "    ", style: str = "") -> list[Text]:
    """``text`` wrapped to ``width`` as lines of ``style``, the first after ``first``, the others after ``rest``
    (a note: ``wrapped(note, 78, "  note: ", "        ", "dim")``).

    >>> [str(t) for t in wrapped("one two three", 12)]
    ['  one two', '    three']
    """
    return [Text(w, style=style) for w in textwrap.wrap(text, width=width, initial_indent=first, subsequent_indent=rest)]


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
    #: where an identifier may break when the table must be narrower (``"/"`` for paths, ``"."`` for
    #: FQNs): after one of these characters, never inside a name, and never inside ``file.py:123``
    breaks: str = ""


def split_after(text: str, chars: str) -> list[str]:
    """``text`` in pieces that each end after one of ``chars`` (the last piece: the rest).

    >>> split_after("models/vision/cnn.py:27", "/")
    ['models/', 'vision/', 'cnn.py:27']
    """
    pieces, start = [], 0
    for i, ch in enumerate(text):
        if ch in chars:
            pieces.append(text[start:i + 1])
            start = i + 1
    if start < len(text) or not pieces:
        pieces.append(text[start:])
    return pieces


def wrap_at(text: str, chars: str, width: int) -> str:
    """``text`` broken into lines of at most ``width`` only after ``chars``; a piece longer than
    ``width`` stays whole on its own line.

    >>> print(wrap_at("encoder.layers.0.self_attn", ".", 16))
    encoder.layers.
    0.self_attn
    """
    out = []
    for line in text.splitlines() or [""]:
        cur = ""
        for piece in split_after(line, chars):
            if cur and len(cur) + len(piece) > width:
                out.append(cur)
                cur = ""
            cur += piece
        out.append(cur)
    return "\n".join(out)


def _longest_line(text: str) -> int:
    return max((len(ln) for ln in text.splitlines()), default=0)


def _words(text: str) -> int:
    return max((len(w) for w in text.split()), default=0)


#: a cell up to this long is a value ("over budget", "recompiles"), kept on one line like an identifier
SHORT = 16


class FitTable:
    """A table laid out at the console's width: identifiers whole, optional columns dropped, then rows stacked.

    Column headers and short values (:data:`SHORT` characters or fewer) never break either; only
    longer prose wraps, and then between words. ``caption`` is a line printed under the table."""

    def __init__(self, title: str | None, columns: list[Col], rows: list[tuple], caption: str | None = None):
        self.title = title
        self.columns = columns
        self.rows = [tuple(cell(v) for v in r) for r in rows]
        self.caption = caption

    def _whole(self, i: int) -> bool:
        """Whether column ``i``'s cells are kept whole: identifiers, and columns of short values."""
        col = self.columns[i]
        return col.ident or all(_longest_line(r[i].plain) <= SHORT for r in self.rows)

    def _col_min(self, i: int) -> int:
        col = self.columns[i]
        cells = [r[i].plain for r in self.rows]
        if col.breaks:
            pieces = [len(p) for c in cells for ln in c.splitlines() for p in split_after(ln, col.breaks)]
            return max(pieces + [len(col.name)])
        if self._whole(i):
            return max([_longest_line(c) for c in cells] + [len(col.name)])
        return max([_words(c) for c in cells] + [len(col.name)])  # the header is never broken

    def _natural(self, i: int) -> int:
        return max([_longest_line(r[i].plain) for r in self.rows] + [len(self.columns[i].name)])

    def _break_widths(self, idx: list[int], width: int) -> dict[int, int]:
        """How narrow each breakable column must be for the table to fit once prose columns have
        wrapped between words: the widest first, never below its longest piece."""
        over = 1 + 3 * len(idx) + sum(self._natural(i) for i in idx) - width
        over -= sum(self._natural(i) - self._col_min(i) for i in idx if not self._whole(i) and not self.columns[i].breaks)
        widths = {i: self._natural(i) for i in idx if self.columns[i].breaks}
        while over > 0:  # one column at a time from the widest, so they end up alike
            room = [i for i in widths if widths[i] > self._col_min(i)]
            if not room:
                break
            widest = max(room, key=lambda i: (widths[i], -i))
            widths[widest] -= 1
            over -= 1
        return {i: w for i, w in widths.items() if w < self._natural(i)}

    def _min_width(self, idx: list[int]) -> int:
        """The narrowest this table can be with columns ``idx``: identifiers, headers and short values
        whole, other cells one word a line."""
        return 1 + 3 * len(idx) + sum(self._col_min(i) for i in idx)  # a border per column, a space each side

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
        narrowed = self._break_widths(idx, width)
        for i in idx:
            c = self.columns[i]
            if i in narrowed:
                table.add_column(c.name, justify=c.justify, no_wrap=True, min_width=narrowed[i], max_width=narrowed[i])
            elif self._whole(i) or c.breaks:
                table.add_column(c.name, justify=c.justify, no_wrap=True, min_width=self._natural(i))
            else:
                table.add_column(c.name, justify=c.justify, overflow="fold", min_width=self._col_min(i))
        for r in self.rows:
            table.add_row(*(Text(wrap_at(r[i].plain, self.columns[i].breaks, narrowed[i]), style=r[i].style)
                            if i in narrowed else r[i] for i in idx))
        dropped = [c.name for i, c in enumerate(self.columns) if i not in idx]
        yield table
        if self.caption:
            yield Text(self.caption, style="table.caption")
        if dropped:
            yield Text(f"(narrow console: {', '.join(dropped)} not shown; --format json has everything)", style="note")

    def _stacked(self) -> RenderResult:
        if self.title:
            yield Text(self.title, style="table.title")
        for r in self.rows:
            first = True
            for c, v in zip(self.columns, r):
                if "\n" in v.plain:  # a value of several lines keeps them under its first
                    v = Text(v.plain.replace("\n", "\n" + " " * (4 + len(c.name))), style=v.style)
                t = Text.assemble(("- " if first else "  "), (f"{c.name}: ", "bold"), v)
                t.no_wrap, t.overflow = True, "fold"
                first = False
                yield t
        if self.caption:
            yield Text(self.caption, style="table.caption")
