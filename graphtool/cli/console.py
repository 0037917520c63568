"""Where graphtool prints: one document on stdout, progress and messages on stderr, all themed.

:class:`RichProgress` is the CLI's :class:`~graphtool.commands.progress.Progress`: a spinner for
phases and a bar for counted work, both on stderr and both gone when the command ends.
"""

from __future__ import annotations

import sys

from graphtool.errors import EXIT_FINDINGS, EXIT_OK


def stderr_console():
    from rich.console import Console

    from graphtool.render.theme import THEME

    return Console(stderr=True, theme=THEME)


def stdout_console():
    from rich.console import Console

    from graphtool.render.theme import THEME

    return Console(theme=THEME)


def print_view(renderable, console=None) -> None:
    """Print a view on stdout (or ``console``). In a pipe or a CI log nothing is laid out to a width
    the reader does not have: text lines stay whole (soft wrap), so no ``file:line`` is ever split."""
    console = console or stdout_console()
    console.print(renderable, soft_wrap=not console.is_terminal)


def emit(data: dict, fmt: str) -> None:
    """Write one JSON or YAML document to stdout."""
    from graphtool.render.documents import format_data

    sys.stdout.write(format_data(data, fmt))


def emit_all(docs: list[dict], fmt: str) -> None:
    """One document on stdout: the report itself, or ``{"models": [...]}`` for several models."""
    emit(docs[0] if len(docs) == 1 else {"models": docs}, fmt)


def say(text: str, style: str | None = None) -> None:
    """A message on stderr, printed as given (no markup, no highlighting)."""
    stderr_console().print(text, style=style, markup=False, highlight=False)


class RichProgress:
    """Progress on stderr. Use as a context manager so the spinner or bar always goes away."""

    def __init__(self, console=None):
        self.console = console or stderr_console()
        self._status = None
        self._bar = None
        self._task = None

    def __enter__(self) -> RichProgress:
        return self

    def __exit__(self, *exc) -> None:
        self._stop_status()
        self._stop_bar()

    def phase(self, text: str) -> None:
        self._stop_bar()
        if self._status is None:
            self._status = self.console.status(text)
            self._status.start()
        else:
            self._status.update(text)

    def advance(self, done: int, total: int, text: str) -> None:
        self._stop_status()
        if not self.console.is_terminal:  # no bar to draw in a pipe or a CI log
            return
        if self._bar is None:
            from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

            self._bar = Progress(TextColumn("{task.description}"), BarColumn(), TextColumn("{task.completed}/{task.total}"),
                                 TimeElapsedColumn(), console=self.console, transient=True)
            self._bar.start()
            self._task = self._bar.add_task(text, total=total)
        self._bar.update(self._task, completed=done, total=total, description=text)

    def note(self, text: str) -> None:
        self.console.print(f"note: {text}", style="note", markup=False, highlight=False)

    def _stop_status(self) -> None:
        if self._status is not None:
            self._status.stop()
            self._status = None

    def _stop_bar(self) -> None:
        if self._bar is not None:
            self._bar.stop()
            self._bar = None


def show_models(results, fmt: str, check: bool, **view_options) -> int:
    """Print each model's view (``view_options``: the command's, such as ``show_all``), or one document;
    the exit code ``--check`` asks for."""
    if fmt == "table":
        for r in results:
            if len(results) > 1:  # several models (a config): each block says whose it is
                from rich.text import Text

                from graphtool.display_paths import display_path

                path = r.header.get("path")
                print_view(Text(f"{display_path(path) or path}:", style="header"))
            print_view(r.view(**view_options))
    else:
        emit_all([r.to_dict() for r in results], fmt)
    return EXIT_FINDINGS if check and any(r.found for r in results) else EXIT_OK
