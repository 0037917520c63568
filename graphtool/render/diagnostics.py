"""Diagnostics printed the way ruff and rustc print them, at any width, nothing that locates a finding cut.

::

    examples/graph_breaks.py:13:9: GT-B001 graph break: Failed to trace builtin operator [gb0059]
       |
    13 |         print("logging from forward")
       |         ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^
       = help: Avoid calling builtin `print` ...
       = see: https://meta-pytorch.github.io/compile-graph-break-site/gb/gb0059.html

The first line wraps only between words of the message: ``path:line:col: CODE`` stays on one line
however narrow the console, and so does every path and URL (a terminal soft-wraps a long one, a CI log
keeps it whole, either way it can be copied). Groups of findings (one model, one region) get a
one-line header. Paths are shown relative to the current folder when under it.
"""

from __future__ import annotations

import textwrap

from rich.console import Console, ConsoleOptions, RenderResult
from rich.text import Text

from graphtool.display_paths import display_path

_SEVERITY_STYLE = {"error": "diagnostic.error", "warning": "diagnostic.warning", "note": "diagnostic.note"}


def _fit(lines: list[str], width: int) -> list[str]:
    """Lines that are too wide: first lose their indent (a URL or path then fits whole), and only a
    word wider than the console itself is folded, where a terminal would fold it anyway."""
    out = []
    for ln in lines:
        if len(ln) > width and len(ln.strip()) <= width:
            ln = ln.strip()
        while len(ln) > width:
            out.append(ln[:width])
            ln = ln[width:]
        out.append(ln)
    return out


def _wrap(text: str, width: int, first: str, rest: str) -> list[str]:
    """Lines of at most ``width``: words (paths, URLs, identifiers) never split unless one alone is wider
    than the console; hyphens are not break points. ``width`` 0 (a pipe, a CI log): one line."""
    if width <= 0:
        return [first + text]
    lines = textwrap.wrap(text, width, initial_indent=first, subsequent_indent=rest,
                          break_long_words=False, break_on_hyphens=False) or [first.rstrip()]
    return _fit(lines, width)


def _head_lines(head: str, message: str, width: int) -> list[str]:
    """``path:line:col: CODE message``: the head is one unit, the message wraps after it with a hanging indent."""
    if width <= 0:
        return [f"{head} {message}"]
    first_word = message.split(" ", 1)[0]
    if len(head) + 1 + len(first_word) > width:
        return _fit([head], width) + _wrap(message, width, "    ", "    ")
    return _wrap(message, width, head + " ", "    ")


def location(d) -> str:
    """``path:line:col`` with the path as the user sees it."""
    if not d.path:
        return "<unknown location>"
    d = d.located()
    return ":".join(str(p) for p in (display_path(d.path), d.line, d.col) if p is not None)


def diagnostic_lines(d, width: int, notes: tuple = ()) -> list[Text]:
    """One diagnostic as styled lines for a ``width``-column console (0: unlimited, a pipe); ``notes``,
    ``(label, text)`` pairs, come before ``help:`` as ``= label: text`` (``= text`` with no label)."""
    d = d.located()
    where = location(d)
    head = f"{where}: {d.code}"
    lines = []
    for i, ln in enumerate(_head_lines(head, d.message, width)):
        t = Text(ln)
        if i == 0 and ln.startswith(head):
            t.stylize("diagnostic.path", 0, len(where))
            t.stylize(_SEVERITY_STYLE.get(d.severity, "diagnostic.warning"), len(where) + 2, len(head))
        lines.append(t)
    gutter = max(len(str(d.line)) if d.line else 1, 2)
    pad = " " * gutter
    if d.source is not None and d.line is not None:
        lines.append(Text(f"{pad} |", style="diagnostic.gutter"))
        src = d.source.expandtabs(4)
        lines.append(Text.assemble((f"{d.line:>{gutter}} | ", "diagnostic.gutter"), src))  # code is never wrapped
        if d.col and d.span:
            lines.append(Text.assemble((f"{pad} | ", "diagnostic.gutter"),
                                       " " * (d.col - 1), ("^" * d.span, _SEVERITY_STYLE.get(d.severity, "diagnostic.warning"))))
    for label, text in (*notes, ("help", d.help), ("see", d.url)):
        if text:
            first = f"{pad} = {label}: " if label else f"{pad} = "
            for ln in _wrap(text, width, first, " " * len(first)):
                t = Text(ln)
                if label and ln.startswith(first):
                    t.stylize("diagnostic.help", len(pad) + 3, len(first) - 2)
                lines.append(t)
    return lines


def group_header(model: str, region: str, n: int) -> Text:
    """``examples/m.py, region 0 forward: 2 findings``."""
    from graphtool.text import count

    parts = [display_path(model) or model] if model else []
    if region:
        parts.append(region)
    return Text(f"{', '.join(parts)}: {count(n, 'finding')}", style="diagnostic.group")


class DiagnosticsView:
    """A list of diagnostics, grouped by model and region, laid out at the console's width.

    ``headers=False`` leaves the group headers out (one model, one region: the header would repeat
    what the report's first line says)."""

    def __init__(self, diagnostics, *, headers: bool = True):
        self.diagnostics = list(diagnostics)
        self.headers = headers

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        from graphtool.analysis.diagnostics import grouped

        # soft wrap (a pipe, a CI log: see cli.console.print_view) lays nothing out: one line per line
        width = 0 if options.no_wrap else options.max_width
        groups = grouped(self.diagnostics)
        show = self.headers and any(m or r for (m, r), _ in groups)
        for (model, region), diags in groups:
            if show:
                header = group_header(model, region, len(diags))
                for ln in _wrap(header.plain, width, "", "  "):
                    yield _no_wrap(Text(ln, style=header.style))
            for d in diags:
                for line in diagnostic_lines(d, width):
                    yield _no_wrap(line)


def _no_wrap(t: Text) -> Text:
    """Laid out already: rich must neither wrap nor crop it (a long path overflows the width, whole)."""
    t.no_wrap = True
    t.overflow = "ignore"
    t.end = "\n"
    return t


class DiagnosticView:
    """One diagnostic laid out at the console's width, with ``notes`` before its help (see :func:`diagnostic_lines`)."""

    def __init__(self, diagnostic, notes: tuple = ()):
        self.diagnostic, self.notes = diagnostic, notes

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        width = 0 if options.no_wrap else options.max_width
        for line in diagnostic_lines(self.diagnostic, width, self.notes):
            yield _no_wrap(line)


class Hanging:
    """A line of prose laid out at the console's width: ``first`` before it, ``rest`` before each
    continuation line, broken only between words (a path or an identifier stays whole). In a pipe or
    a CI log (soft wrap) it stays one line, however long: nothing is ever cut.

    >>> from rich.console import Console
    >>> c = Console(width=30, color_system=None)
    >>> with c.capture() as cap:
    ...     c.print(Hanging("= help: ", "create tensors on the input's device and avoid .cpu()", rest="    "))
    >>> print(cap.get())
    = help: create tensors on the
        input's device and avoid
        .cpu()
    <BLANKLINE>
    """

    def __init__(self, first: str, text: str, *, rest: str | None = None, style: str | None = None):
        self.first, self.text, self.style = first, text, style
        self.rest = " " * len(first) if rest is None else rest

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        width = 0 if options.no_wrap else options.max_width
        for ln in _wrap(self.text, width, self.first, self.rest):
            yield _no_wrap(Text(ln, style=self.style or ""))


def diagnostics_view(diagnostics, *, headers: bool = True) -> DiagnosticsView:
    return DiagnosticsView(diagnostics, headers=headers)


def format_diagnostics(diagnostics, width: int = 0) -> str:
    """Plain text, no styles, for files and tests: what a pipe gets."""
    from graphtool.analysis.diagnostics import grouped

    lines = []
    groups = grouped(diagnostics)
    show = any(m or r for (m, r), _ in groups)
    for (model, region), diags in groups:
        if show:
            lines.append(group_header(model, region, len(diags)).plain)
        for d in diags:
            lines.extend(t.plain for t in diagnostic_lines(d, width))
    return "\n".join(lines) + ("\n" if lines else "")
