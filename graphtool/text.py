"""Plain-text helpers every layer shares.

>>> first_line("  boom\\nmore")
'boom'
>>> first_line("") is None
True
>>> count(1, "graph break"), count(2, "copy", "copies")
('1 graph break', '2 copies')
"""

from __future__ import annotations


def first_line(text: object) -> str | None:
    """The first non-blank line of ``text`` (an exception's message), stripped; None when blank."""
    lines = [ln.strip() for ln in str(text or "").strip().splitlines()]
    return lines[0] if lines else None


def count(n: int, word: str, plural: str | None = None) -> str:
    """``n`` and the noun, singular for 1: the one place graphtool makes a plural (no ``region(s)``)."""
    return f"{n} {word if n == 1 else plural or word + 's'}"


def shape_text(shape) -> str:
    """A tensor's shape as error messages and notes write it.

    >>> shape_text((2, 16)), shape_text(())
    ('2x16', 'scalar')
    """
    return "x".join(str(int(s)) for s in shape) or "scalar"
