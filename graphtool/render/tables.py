"""Table cells as literal text: user names such as ``inputs[0]`` or ``compile[aot_eager]`` must
not be read as rich markup."""

from __future__ import annotations

from rich.text import Text


def cell(value) -> Text:
    return value if isinstance(value, Text) else Text(str(value))


def row(table, *values) -> None:
    table.add_row(*(cell(v) for v in values))
