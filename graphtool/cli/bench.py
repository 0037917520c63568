"""``graphtool bench``: eager vs compiled vs CUDA-graph replay, checked and measured honestly."""

from __future__ import annotations

import typer

from graphtool.cli import console, options
from graphtool.errors import NoCudaDevice


def register(app: typer.Typer) -> None:
    options.register(app, "bench", (
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
    ), show=_show, ask=lambda sessions, own, view: sessions[0].bench(**own))


def _show(result, view) -> int:
    if view["format"] == "table":
        console.print_view(result.view())
    else:
        console.emit(result.to_dict(), view["format"])
    if result.cuda_missing:
        raise NoCudaDevice(
            "no CUDA device is present: --cudagraphs needs one to capture and replay; eager and compiled were measured above",
            hint="run on a machine with a CUDA GPU, or drop --cudagraphs (graphtool cudagraphs predicts the verdict without one)",
        )
    return 0
