"""``graphtool compile``: where a real compile's time goes, and what compiling the repeated blocks would save."""

from __future__ import annotations

import sys

import typer

from graphtool.cli import options


def register(app: typer.Typer) -> None:
    options.register(app, "compile", (
        "Compile the model for real with your backend and mode on this machine's device, in a fresh\n"
        "process with inductor's caches off, and report the first compiled call against an eager step,\n"
        "torch's own time per phase and per frame, forward against backward, the modules that make the\n"
        "biggest graphs and the blocks that repeat with identical graphs.\n\n"
        "--regional compiles the repeated blocks one by one in a second fresh process and compares\n"
        "compile and step time, with the hazards found on this model and the one-line change.\n\n"
        "Exit codes: 0 done; 1 the compile failed (torch's error at your line); 2 could not run or\n"
        "--timeout ran out (what finished is shown).\n\n"
    ) + options.examples(
        "graphtool compile model.py",
        "graphtool compile model.py --regional        # whole vs block by block",
        "graphtool compile model.py --warm            # and again, caches on",
        "graphtool compile model.py --mode max-autotune --format json",
    ), show=_show, ask=lambda sessions, own, view: sessions[0].compile(**own))  # the first model: compiles take minutes


def _show(result, view: dict) -> int:
    from graphtool.cli import console

    if view["format"] == "table":
        console.print_view(result.view())
    else:
        console.emit(result.to_dict(), view["format"])
    if result.report.stopped is not None:  # one line, never wrapped: its file:line stays whole
        sys.stderr.write(f"graphtool: error: {result.diagnostics()}\n")
    return result.exit_code()
