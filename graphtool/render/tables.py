"""Table cells as literal text: user names such as ``inputs[0]`` or ``compile[aot_eager]`` must
not be read as rich markup."""

from __future__ import annotations

from rich.text import Text


def cell(value) -> Text:
    return value if isinstance(value, Text) else Text(str(value))


def row(table, *values) -> None:
    table.add_row(*(cell(v) for v in values))


def where(source) -> str:
    """A ``Source`` as ``path:line`` (the path relative to the current folder when under it), else ``-``."""
    from graphtool.display_paths import display_path

    return f"{display_path(source.file)}:{source.line}" if source else "-"
