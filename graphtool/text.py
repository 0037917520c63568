"""Plain-text helpers every layer shares.

>>> first_line("  boom\\nmore")
'boom'
>>> first_line("") is None
True
"""

from __future__ import annotations


def first_line(text: object) -> str | None:
    """The first non-blank line of ``text`` (an exception's message), stripped; None when blank."""
    lines = [ln.strip() for ln in str(text or "").strip().splitlines()]
    return lines[0] if lines else None
