"""Fixed-width console output for render tests, the same on every machine (as rich's own tests render).

Nothing is detected: no terminal, no Jupyter, and an empty environment, so COLUMNS, LINES, TERM,
COLORTERM and NO_COLOR cannot change a snapshot.
"""

from __future__ import annotations

import io

from rich.console import Console

from graphtool.render.theme import THEME


def render_text(renderable, width: int, *, color: bool = False) -> str:
    """What ``renderable`` prints on a ``width``-column console: plain text, or with ANSI styles when ``color``.

    >>> from rich.text import Text
    >>> render_text(Text("one two"), 4).splitlines()
    ['one ', 'two']
    >>> render_text(Text("ok", style="verdict.ok"), 4, color=True)
    '\\x1b[1;32mok\\x1b[0m\\n'
    """
    console = Console(
        width=width,
        height=25,
        file=io.StringIO(),
        record=True,
        force_terminal=False,
        force_jupyter=False,
        force_interactive=False,
        color_system="standard" if color else None,
        legacy_windows=False,
        theme=THEME,
        _environ={},
    )
    console.print(renderable)
    return console.export_text(styles=color)
