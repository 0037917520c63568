"""``graphtool diff``: what changed between two graphtool documents, with lint's exit codes and formats."""

from __future__ import annotations

import functools
import os
import sys
from pathlib import Path
from typing import Optional

import typer

from graphtool.cli import console, options
from graphtool.display_paths import display_path
from graphtool.errors import UsageError

DIFF_FORMATS = ("text", "json", "yaml", "sarif", "github", "junit", "html")


def register(app: typer.Typer) -> None:
    app.command(
        "diff",
        short_help="What changed between two reports or two runs; a CI gate with --fail-on.",
        help=(
            "Compare two documents a graphtool command wrote (trace, lint, cudagraphs, memory, shapes, mutations,\n"
            "devices, or a graphtool log document): graph breaks added, removed and moved (the same break at\n"
            "another line), recompiles, regions and graphs, the CUDA-graph verdict, mutations and aliases, saved\n"
            "activations and the step's peak, node counts, compile time, capture coverage and the torch versions.\n"
            "Imports no torch.\n\n"
            "Exit codes: 0 nothing listed in --fail-on got worse, 1 something did, 2 could not compare.\n\n"
        ) + options.examples(
            "graphtool diff before.json after.json",
            "graphtool diff old.json new.json --fail-on new-breaks",
            "graphtool diff a.json b.json --fail-on new-breaks,memory:+10%",
            "graphtool diff a.json b.json --format sarif -o diff.sarif",
            "graphtool diff a.json b.json -o diff.html   # both sides",
        ),
    )(diff)


def diff(
    before: str = typer.Argument(..., help="The earlier document (JSON or YAML a graphtool command wrote).", show_default=False),
    after: str = typer.Argument(..., help="The later document, of the same kind.", show_default=False),
    fail_on: Optional[str] = typer.Option(
        None, "--fail-on", metavar="LIST",
        help="Exit 1 when one of these got worse: new-breaks, recompiles, cudagraphs, mutations, memory[:+N%], coverage "
             "(comma-separated; default: none, the diff only reports).",
    ),
    fmt: Optional[str] = typer.Option(None, "--format", "-f", help="text (default), json, yaml, sarif, github, junit or html."),
    output: Optional[Path] = typer.Option(
        None, "--output", "-o", help="Write the diff here (a .html name: the page with both sides); the terminal still gets the text."),
) -> int:
    if fmt is None:
        fmt = "html" if output is not None and output.suffix.lower() in (".html", ".htm") else "text"
    if fmt not in DIFF_FORMATS:
        raise UsageError(f"--format {fmt!r} is not one of {', '.join(DIFF_FORMATS)}")
    if fmt == "html" and output is None:
        raise UsageError("--format html writes a page: give it a file with -o diff.html")
    from graphtool.commands.diff import diff as run

    result = run(before, after, fail_on=fail_on)
    _emit(result, fmt, Path(os.path.abspath(output)) if output is not None else None, output)
    return result.exit_code()


def _emit(result, fmt: str, output: Optional[Path], shown: Optional[Path]) -> None:
    from graphtool.render.documents import format_data, write_atomic

    if fmt in ("json", "yaml"):  # no rich to import: the document alone
        text = functools.partial(format_data, result.to_dict(), fmt)
    elif fmt == "text":
        text = functools.partial(result.text, 0)
    else:
        from graphtool.render import diff as render

        text = functools.partial(getattr(render, f"format_{fmt}"), result.report)  # format_sarif(report), ...
    if output is not None:
        write_atomic(output, text())
        console.print_view(result, console.stderr_console())
        console.say(f"diff written to {display_path(str(shown))}")
    elif fmt == "text":
        console.print_view(result)
    else:
        sys.stdout.write(text())
