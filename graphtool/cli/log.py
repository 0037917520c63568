"""``graphtool log``: a real run's TORCH_TRACE logs, every rank, after the run; ``--against`` beside the prediction."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Optional

import typer

from graphtool.cli import console, options


def register(app: typer.Typer) -> None:
    app.command(
        "log",
        short_help="Read a real run's TORCH_TRACE logs, every rank: breaks, recompiles, compile time, desync.",
        help=(
            "Read the structured-trace logs torch writes under TORCH_TRACE=DIR (a folder, .log or .log.gz\n"
            "files; every rank) without importing torch: graphs compiled, graph breaks by site, recompiles\n"
            "and the recompile limit, compile time by frame and phase, CUDA-graph skips, and ranks that\n"
            "did not compile alike (a desync), first. --against puts graphtool's prediction for the same\n"
            "script beside each fact.\n\n"
            "Exit codes: 0 read (whatever it found), 2 no TORCH_TRACE log could be read.\n\n"
        ) + options.examples(
            "TORCH_TRACE=trace python train.py && graphtool log trace",
            "graphtool log trace --format json",
            "graphtool log ci-artifacts/*.log.gz",
            "graphtool log trace -o log.html          # with each AOT graph",
            "graphtool log trace --against model.py   # prediction beside run",
        ),
    )(log)


def log(
    paths: list[str] = typer.Argument(..., metavar="PATH", help="A TORCH_TRACE folder, .log or .log.gz files.",
                                      show_default=False),
    against: Optional[str] = typer.Option(
        None, "--against", metavar="MODEL",
        help="A model script (path.py or path.py:FACTORY): graphtool's prediction for it beside each fact (imports torch).",
    ),
    entry: Optional[str] = options.EntryOpt,
    fmt: str = options.FormatOpt,
    output: Optional[Path] = typer.Option(
        None, "--output", "-o", help="Also write one self-contained HTML page here, each compile's AOT graphs drawn.",
    ),
) -> int:
    from graphtool.commands.log import log as run
    from graphtool.display_paths import display_path
    from graphtool.errors import UsageError

    options.check_format(fmt)
    if output is not None:
        output = Path(os.path.abspath(output))
        if output.is_dir():
            raise UsageError(f"{output}: is a folder; -o takes the page's file name (log.html)")
    if against is not None:
        from graphtool.capture.user.script import check_script_path

        check_script_path(against)
    with console.RichProgress() as progress:
        result = run(paths, against=against, entry=entry, pictures=output is not None, progress=progress)
    if output is not None:
        result.save(output)
    if fmt == "table":
        console.print_view(result.view())
    else:
        console.emit(result.to_dict(), fmt)
    if output is not None:
        console.say(f"page written to {display_path(str(output))}")
    return 0
