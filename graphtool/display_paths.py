"""How graphtool shows a file path: relative to the current folder when inside it, else as is."""

from __future__ import annotations

import functools
import os


def display_path(path: str | None) -> str | None:
    """``/repo/models/m.py`` -> ``models/m.py`` when run from ``/repo``."""
    if not path:
        return path
    return _shown(path, os.getcwd())


@functools.lru_cache(maxsize=4096)
def _shown(path, cwd: str):
    """:func:`display_path` from the folder ``cwd``: a page of a 5,502-module model shows 23,000 node sources, most of
    them a few files, and ``os.path.relpath`` cost 0.4 s of its 2 s."""
    try:
        rel = os.path.relpath(path, cwd)
    except ValueError:  # another drive on Windows
        return path
    return path if rel.startswith("..") else rel.replace(os.sep, "/")


def display_site(text: str) -> str:
    """``get_input_schedule() at /repo/m.py:12`` -> ``get_input_schedule() at m.py:12`` from ``/repo``: the path after
    the last `` at `` shown by :func:`display_path`; any other text as is.

    >>> display_site("--sizes x:0=4,6")
    '--sizes x:0=4,6'
    """
    if " at " not in text:
        return text
    head, _, where = text.rpartition(" at ")
    path, _, line = where.rpartition(":")
    return f"{head} at {display_path(path) or path}:{line}" if path else text
