"""Matching one side's graph breaks to the other's by what they are, not where they are.

A break is the same break when its kind (torch's gb id, else its reason), its file and the text of its source
line agree: one that only moved (lines added above it) is *moved*, not removed and added. What is left is then
matched by kind, file and line (the line's text was edited, the break is the same), and last by kind, the file's
name and the source text (the same script in another folder). A side without source text (a ``graphtool log``
document) matches by kind, file and line only. Several breaks with one key pair in line order.

Example::

    >>> from graphtool.analysis.diff.documents import Break
    >>> a = (Break("gb0025", "gb0025", "graph_break()", "/m.py", 16, "torch._dynamo.graph_break()"),)
    >>> b = (Break("gb0025", "gb0025", "graph_break()", "/m.py", 18, "torch._dynamo.graph_break()"),)
    >>> m = match_breaks(a, b)
    >>> [(x.line, y.line) for x, y in m.moved], m.added, m.removed
    ([(16, 18)], (), ())
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from graphtool.analysis.diff.documents import Break, file_key


@dataclass(frozen=True)
class BreakMatch:
    """``same`` pairs at one line (or whose line's text was edited), ``moved`` pairs at another line."""

    same: tuple[tuple[Break, Break], ...]
    moved: tuple[tuple[Break, Break], ...]
    added: tuple[Break, ...]
    removed: tuple[Break, ...]


def match_breaks(before: Sequence[Break], after: Sequence[Break], before_root: str | None = None,
                 after_root: str | None = None) -> BreakMatch:
    """Pair ``before``'s breaks with ``after``'s (``*_root``: each side's model folder, see
    :func:`~graphtool.analysis.diff.documents.file_key`)."""
    left, right = list(before), list(after)
    pairs: list[tuple[Break, Break]] = []
    for key in (_by_text, _by_line, _by_name):
        found, left, right = _pair(left, right, lambda b, k=key: k(b, before_root), lambda b, k=key: k(b, after_root))
        pairs += found
    same = tuple(p for p in pairs if p[0].line == p[1].line)
    moved = tuple(p for p in pairs if p[0].line != p[1].line)
    return BreakMatch(same, moved, tuple(right), tuple(left))


def _by_text(b: Break, root: str | None) -> tuple | None:
    return (b.kind, file_key(b.file, root), b.source_text) if b.source_text else None


def _by_line(b: Break, root: str | None) -> tuple:
    return (b.kind, file_key(b.file, root), b.line)


def _by_name(b: Break, root: str | None) -> tuple | None:
    return (b.kind, os.path.basename(b.file or ""), b.source_text) if b.source_text else None


def _pair(left: list, right: list, key_left: Callable, key_right: Callable) -> tuple[list, list, list]:
    """Pairs of items with equal keys (None never pairs), in line order within a key; what is left on each side."""
    waiting: dict = {}
    for b in sorted(right, key=_line):
        k = key_right(b)
        if k is not None:
            waiting.setdefault(k, []).append(b)
    pairs, rest_left = [], []
    for b in sorted(left, key=_line):
        k = key_left(b)
        queue = waiting.get(k) if k is not None else None
        if queue:
            pairs.append((b, queue.pop(0)))
        else:
            rest_left.append(b)
    taken = {id(p[1]) for p in pairs}
    return pairs, _in_order(rest_left, left), [b for b in right if id(b) not in taken]


def _line(b: Break) -> tuple:
    return (b.file or "", b.line or 0)


def _in_order(items: list, original: list) -> list:
    keep = {id(x) for x in items}
    return [x for x in original if id(x) in keep]
