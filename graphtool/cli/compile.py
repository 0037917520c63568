"""``graphtool compile``: where a real compile's time goes, and what compiling the repeated blocks would save."""

from __future__ import annotations

from typing import Optional

import typer

from graphtool.cli import console, options


def register(app: typer.Typer) -> None:
    app.command(
        "compile",
        short_help="Compile the model for real: where the time goes, which blocks repeat, regional vs whole.",
        help=(
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
        ),
    )(compile_cmd)


def compile_cmd(
    model: Optional[str] = options.ModelArg,
    entry: Optional[str] = options.EntryOpt,
    backend: str = typer.Option("inductor", "--backend", help="torch.compile backend (inductor, aot_eager, eager, ...)."),
    mode: Optional[str] = typer.Option(None, "--mode", help="torch.compile mode: default, reduce-overhead, max-autotune, max-autotune-no-cudagraphs."),
    regional: bool = typer.Option(False, "--regional", help="Also compile the repeated blocks one by one in a second fresh process."),
    warm: bool = typer.Option(False, "--warm", help="Also compile again in another process with inductor's caches on (the hits)."),
    inference: bool = typer.Option(False, "--inference", help="Compile and time the forward only (no backward)."),
    device: Optional[str] = typer.Option(None, "--device", help="cpu or cuda[:N] (default: cuda when present, else cpu)."),
    steps: int = typer.Option(3, "--steps", help="Timed steps after the first call; the step time is their median."),
    fmt: str = options.FormatOpt,
    timeout: Optional[float] = typer.Option(
        None, "--timeout", metavar="SECONDS",
        help="Stop after this many seconds in all: the running child is ended, what finished is shown, exit 2.",
    ),
) -> int:
    from graphtool.commands.compile import compile_model

    options.check_format(fmt)
    with console.RichProgress() as progress:
        result = compile_model(model, entry=entry, backend=backend, mode=mode, device=device, inference=inference,
                               warm=warm, regional=regional, steps=steps, timeout=timeout,
                               debug=options.debug_enabled(), progress=progress)
    if fmt == "table":
        console.print_view(result.view())
    else:
        console.emit(result.to_dict(), fmt)
    if result.report.stopped is not None:  # one line, never wrapped: its file:line stays whole
        import sys

        sys.stderr.write(f"graphtool: error: {result.diagnostics()}\n")
    return result.exit_code()
