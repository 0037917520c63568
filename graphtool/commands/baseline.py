"""Lint's baseline file, read, written and judged in one place: ``graphtool lint --baseline``, the API's
``graphtool.lint(..., baseline=)`` and the pytest plugin's ``--graphtool-baseline`` all come here.

The file is JSON: ``{"version": 2, "breaks": [{"model": ..., "file": ..., "line": ..., "reason": ...}]}``,
every path relative to the file's own folder (:func:`graphtool.analysis.lint.make_baseline`). A file
that is not one is a :class:`~graphtool.errors.UsageError` naming the file and, where it applies, the
line of the entry at fault.

    >>> import tempfile, pathlib
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "gb.json"
    >>> _ = path.write_text('{"version": 2, "breaks": [\\n  {"model": "m.py"}\\n]}')
    >>> read(path)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    graphtool.errors.UsageError: .../gb.json:2: breaks[0]: 'kind' missing
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Optional

from graphtool.errors import UsageError


def read(path: Path, *, update: str = "--update-baseline") -> dict:
    """The baseline at ``path``, checked (with ``root``, the folder its paths are relative to), or a
    :class:`UsageError` that names the file, the line where it applies, and what to do (``update``: the
    option that writes the file again, as the caller's users know it)."""
    from graphtool.analysis.lint import BaselineError, validate_baseline

    path = Path(path)
    if not path.is_file():
        if path.exists():
            raise UsageError(f"{path}: not a baseline file (it is not a regular file)")
        raise UsageError(f"{path}: no such baseline file", hint=f"create it with {update}")
    from graphtool.config import read_utf8

    text = read_utf8(path, UsageError, what="the baseline", hint=f"write it again with {update}")
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise UsageError(f"{path}:{exc.lineno}: not valid JSON: {exc.msg}") from None
    except RecursionError:
        raise UsageError(f"{path}: not a graphtool baseline: nested too deeply") from None
    try:
        return validate_baseline(data, str(path))
    except BaselineError as exc:
        line = _entry_line(text, exc.index) if exc.index is not None else None
        where = f"{path}:{line}" if line else str(path)
        hint = (f"upgrade graphtool to the version that wrote it, or write it again with {update}"
                if exc.newer else f"write it again with {update}")
        raise UsageError(f"{where}: {exc}", hint=hint) from None


def accepted(baseline) -> Optional[dict]:
    """What a caller hands over as a baseline: a file (read here), its content already read, or None."""
    if baseline is None or isinstance(baseline, dict):
        return baseline
    return read(Path(baseline))


def judge(target, result, baseline: Optional[dict] = None, *, strict: bool = False):
    """One model's lint result judged against its budget and the baseline's entries for it (a ``ModelLint``)."""
    from graphtool.analysis.lint import judge as judged

    return judged(target, result, baseline=baseline, strict=strict)


def content(report, path: Path) -> dict:
    """The file that would record every break of ``report`` at ``path`` (paths relative to its folder)."""
    from graphtool.analysis.lint import make_baseline

    return make_baseline(report, root=Path(os.path.abspath(path)).parent)


def merged(old: dict, fresh: dict, models: set[str]) -> tuple[dict, int]:
    """``fresh`` with the entries of ``old`` for models it does not describe kept (``models``: the ``model``
    values ``fresh`` replaces); and how many were kept."""
    kept = [e for e in old.get("breaks", []) if e.get("model") not in models]
    return {**fresh, "breaks": kept + fresh["breaks"]}, len(kept)


def same(data: dict, old: dict) -> bool:
    """Whether writing ``data`` would leave the file ``old`` was read from as it was (``root`` is not in a file)."""
    return data == {k: v for k, v in old.items() if k != "root"}


def write(path: Path, data: dict) -> None:
    """Write the baseline whole or not at all."""
    from graphtool.render.documents import format_json, write_atomic

    write_atomic(Path(path), format_json(data))


def _entry_line(text: str, index: int) -> Optional[int]:
    """The line where entry ``index`` of the top-level ``"breaks"`` array starts, if it can be found."""
    decoder = json.JSONDecoder()
    m = re.search(r'"breaks"\s*:\s*\[', text)
    if m is None:
        return None
    pos, i = m.end(), 0
    try:
        while True:
            pos = _skip(text, pos)
            if i == index:
                return text.count("\n", 0, pos) + 1
            _, pos = decoder.raw_decode(text, pos)
            pos = _skip(text, pos)
            if text[pos:pos + 1] != ",":
                return None
            pos, i = pos + 1, i + 1
    except (ValueError, RecursionError):
        return None


def _skip(text: str, pos: int) -> int:
    while pos < len(text) and text[pos] in " \t\r\n":
        pos += 1
    return pos
