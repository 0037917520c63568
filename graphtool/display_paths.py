"""How graphtool shows a file path: relative to the current folder when inside it, else as is."""

from __future__ import annotations

import os


def display_path(path: str | None) -> str | None:
    """``/repo/models/m.py`` -> ``models/m.py`` when run from ``/repo``."""
    if not path:
        return path
    try:
        rel = os.path.relpath(path)
    except ValueError:  # another drive on Windows
        return path
    return path if rel.startswith("..") else rel.replace(os.sep, "/")
