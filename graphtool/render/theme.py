"""Every style graphtool's terminal output uses, by meaning, in one theme (rich's default_styles model).

Views name a meaning (``"verdict.bad"``); the theme says how it looks. Consoles made by
:func:`graphtool.cli.console.stdout_console` and friends carry :data:`THEME`.

>>> THEME.styles["verdict.ok"].color.name
'green'
"""

from __future__ import annotations

from rich.theme import Theme

STYLES = {
    "verdict.ok": "bold green",  # the one-line verdict when all is well
    "verdict.bad": "bold red",  # ... when something fails or is found
    "verdict": "bold",  # a verdict that judges nothing (a summary line)
    "status.ok": "green",  # a row's status cell: passed, timed
    "status.bad": "red",  # ... failed, mismatched, errored
    "status.skipped": "yellow",  # ... skipped
    "finding": "red",  # a line that explains a failure
    "fixed": "green",  # something better than before (a baseline break gone)
    "note": "yellow",  # worth reading, not a failure
    "warning": "yellow",  # a graph break or another caveat on the result
    "header": "bold",  # a report's first line
    "diagnostic.path": "bold",  # path:line:col at the start of a diagnostic
    "diagnostic.error": "bold red",  # the code of a diagnostic that fails the run
    "diagnostic.warning": "bold yellow",  # ... of one worth fixing
    "diagnostic.note": "bold cyan",  # ... of one for information
    "diagnostic.gutter": "blue",  # the line-number gutter around the source line
    "diagnostic.help": "bold",  # "help:" and "see:"
    "diagnostic.group": "bold underline",  # the header of a model's (or region's) findings
}

THEME = Theme(STYLES)
