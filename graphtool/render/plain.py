"""A renderable as plain text: what a pipe gets, without styles (``width`` 0: nothing wrapped).

    >>> from rich.text import Text
    >>> format_plain(Text("one two", style="verdict"), 0)
    'one two\\n'
"""

from __future__ import annotations

import io


def format_plain(renderable, width: int = 100) -> str:
    """``renderable`` printed on a ``width``-column console (0: as wide as a line is), styles dropped,
    trailing spaces cut: the text a result's ``text()`` and ``diagnostics()`` return."""
    from rich.console import Console

    from graphtool.render.theme import THEME

    console = Console(file=io.StringIO(), width=width or 10_000, theme=THEME, color_system=None, force_terminal=False,
                      force_jupyter=False, record=True, soft_wrap=True)
    console.print(renderable)
    return "\n".join(line.rstrip() for line in console.export_text().splitlines()) + "\n"
