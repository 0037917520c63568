"""``graphtool bench``: eager vs compiled vs CUDA-graph replay, checked and measured honestly."""

from __future__ import annotations

from typing import Optional

import typer

from graphtool.cli import console, options
from graphtool.errors import NoCudaDevice


def register(app: typer.Typer) -> None:
    app.command(
        "bench",
        short_help="Time eager, torch.compile and CUDA-graph replay side by side.",
        help=(
            "Time eager, torch.compile and (with --cudagraphs) graphtool's own CUDA-graph replay and\n"
            "mode=\"reduce-overhead\", side by side on the same inputs; every mode is checked against\n"
            "eager before it is timed. What is timed is training, as every command defaults to\n"
            "(forward and backward when something requires grad); --inference times the forward.\n\n"
        ) + options.examples(
            "graphtool bench model.py                          # eager vs torch.compile",
            "graphtool bench model.py --inference              # forward only",
            "graphtool bench model.py --cudagraphs --backward  # on a GPU",
            "graphtool bench model.py --compile aot_eager --iters 50 --format json",
        ) + (
            "\n\nA spread above 5% between repeats is flagged: the medians cannot be trusted;\n"
            "raise --iters or --repeat, or run on a quieter machine.\n\n"
            "A model that draws random numbers (dropout in training) is checked against eager\n"
            "with dropout off, then timed as written."
        ),
    )(bench)


def bench(
    model: Optional[str] = options.ModelArg,
    entry: Optional[str] = options.EntryOpt,
    cudagraphs: bool = typer.Option(False, "--cudagraphs", help="Also capture and replay a CUDA graph, and run mode=\"reduce-overhead\" (needs CUDA)."),
    compile_mode: str = typer.Option(
        "default", "--compile",
        help="torch.compile mode (default, reduce-overhead, max-autotune...) or backend (aot_eager, inductor...); none to skip.",
    ),
    backward: bool = typer.Option(False, "--backward", help="Time forward + backward and check gradients (the default when something requires grad)."),
    inference: bool = typer.Option(False, "--inference", help="Time the forward alone (default: training, as every command)."),
    warmup: int = typer.Option(10, "--warmup", help="Untimed iterations before timing."),
    iters: int = typer.Option(100, "--iters", help="Iterations per timed repeat."),
    repeat: int = typer.Option(3, "--repeat", help="Timed repeats (median, min, max and spread are over these)."),
    device: Optional[str] = typer.Option(
        None, "--device",
        help="Where to run: cpu, cuda or cuda:N (the script is built under it). Default: cuda when a GPU is present, else cpu.",
    ),
    fmt: str = options.FormatOpt,
    timeout: Optional[float] = options.TimeoutOpt,
) -> int:
    from graphtool.commands.bench import bench as run

    options.check_format(fmt)
    with console.RichProgress() as progress, options.time_limit(timeout):
        result = run(model, entry=entry, cudagraphs=cudagraphs, compile_mode=compile_mode, backward=backward or None, inference=inference,
                     warmup=warmup, iters=iters, repeat=repeat, device=device, debug=options.debug_enabled(),
                     progress=progress)
    if fmt == "table":
        console.print_view(result.view())
    else:
        console.emit(result.to_dict(), fmt)
    if result.cuda_missing:
        raise NoCudaDevice(
            "no CUDA device is present: --cudagraphs needs one to capture and replay; eager and compiled were measured above",
            hint="run on a machine with a CUDA GPU, or drop --cudagraphs (graphtool cudagraphs predicts the verdict without one)",
        )
    return 0
