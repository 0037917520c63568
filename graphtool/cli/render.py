"""``graphtool render``: autograd and forward/backward/joint graphs drawn with Graphviz."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from graphtool.cli import console, options


def register(app: typer.Typer) -> None:
    app.command(
        "render",
        short_help="Draw the autograd graph or an AOT graph with Graphviz.",
        help=(
            "Draw the autograd graph, or the forward, backward or joint AOT graph, with Graphviz.\n\n"
            "Large graphs fold into one box per module, and identical repeated blocks into one\n"
            "(\"12 x TransformerEncoderLayer\"), above 120 nodes unless --collapse none.\n\n"
        ) + options.examples(
            "graphtool render model.py                      # model-autograd.svg",
            "graphtool render model.py --graph joint -o joint.png",
            "graphtool render model.py --collapse module --depth 2 --saved",
        ),
    )(render)


def render(
    model: Optional[str] = options.ModelArg,
    entry: Optional[str] = options.EntryOpt,
    device: Optional[str] = options.DeviceOpt,
    graph: str = typer.Option("autograd", "--graph", "-g", help="autograd, forward, backward or joint."),
    output: Optional[Path] = typer.Option(None, "--output", "-o", help="Output file (default: MODEL-GRAPH.svg here)."),
    fmt: Optional[str] = typer.Option(None, "--format", "-f", help="svg, png, pdf or dot (default: from the file name, else svg)."),
    collapse: str = typer.Option("auto", "--collapse", help="auto (fold by module above 120 nodes), module, or none."),
    depth: Optional[int] = typer.Option(None, "--depth", help=(
        "Fold at module depth N, counted by FQN: 1 = the model's children (layers), 2 = theirs (layers.0), "
        "containers included; default: the deepest that keeps about 60 boxes.")),
    saved: bool = typer.Option(False, "--saved", help="Autograd graph: show each node's saved tensors' shapes."),
    region: int = typer.Option(0, "--region", help="Which compiled region (after graph breaks) to draw."),
    backend: str = options.BackendOpt,
    timeout: Optional[float] = typer.Option(
        None, "--timeout", metavar="SECONDS",
        help="Stop with exit 2 after this many seconds, the trace and the layout together, naming the script's line if it was running (default: no limit).",
    ),
) -> int:
    from graphtool.commands.render import render as run

    with console.RichProgress() as progress:  # --timeout: the trace and the layout share it (commands.render)
        result = run(model, output=output, fmt=fmt, timeout=timeout, entry=entry, device=device, graph=graph,
                     saved=saved, region=region, backend=backend, collapse=collapse, depth=depth, debug=options.debug_enabled(),
                     progress=progress)
    laid_out = f", laid out by {result.renderer}" if result.renderer != "none" else ""
    console.say(f"wrote {result.output} ({result.nodes} nodes, {result.edges} edges{laid_out})")
    return 0
