"""How a long-running command says what it is doing, without knowing who listens, and where the user's prints go.

The CLI passes a rich spinner and bar; tests and library callers pass nothing (:data:`SILENT`).

Example::

    >>> class Log:
    ...     def __init__(self): self.lines = []
    ...     def phase(self, text): self.lines.append(text)
    ...     def advance(self, done, total, text): self.lines.append(f"{text} {done}/{total}")
    ...     def note(self, text): self.lines.append("note: " + text)
    >>> log = Log(); log.phase("importing torch..."); log.lines
    ['importing torch...']
"""

from __future__ import annotations

import contextlib
import sys
from typing import Protocol


class Progress(Protocol):
    def phase(self, text: str) -> None:
        """A new step has started ("tracing region 1...")."""

    def advance(self, done: int, total: int, text: str) -> None:
        """``done`` of ``total`` units of counted work ("timing eager", 120/300)."""

    def note(self, text: str) -> None:
        """Something the user should read even though the command goes on."""


class _Silent:
    def phase(self, text: str) -> None:
        pass

    def advance(self, done: int, total: int, text: str) -> None:
        pass

    def note(self, text: str) -> None:
        pass


#: a Progress that says nothing: the default for library callers and tests
SILENT: Progress = _Silent()


def quiet_stdout():
    """The user's own prints go to stderr while graphtool runs its code: stdout carries only graphtool's document."""
    return contextlib.redirect_stdout(sys.stderr)
