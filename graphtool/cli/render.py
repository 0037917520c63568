"""``graphtool render``: autograd and forward/backward/joint graphs drawn with Graphviz."""

from __future__ import annotations

import typer

from graphtool.cli import console, options


def register(app: typer.Typer) -> None:
    options.register(app, "render", (
        "Draw the autograd graph, or the forward, backward or joint AOT graph, with Graphviz.\n\n"
        "Large graphs fold into one box per module, and identical repeated blocks into one\n"
        "(\"12 x TransformerEncoderLayer\"), above 120 nodes unless --collapse none.\n\n"
    ) + options.examples(
        "graphtool render model.py                      # model-autograd.svg",
        "graphtool render model.py --graph joint -o joint.png",
        "graphtool render model.py --collapse module --depth 2 --saved",
    ), show=_show, ask=_ask)


def _ask(sessions, own, view):
    from graphtool.commands.render import default_output

    session = sessions[0]  # --timeout: the trace and the layout share it (commands.render)
    output = own["output"] or default_output(session.target, own["graph"], own["fmt"])
    return session.render(**{**own, "output": output})


def _show(result, view) -> int:
    laid_out = f", laid out by {result.renderer}" if result.renderer != "none" else ""
    console.say(f"wrote {result.output} ({result.nodes} nodes, {result.edges} edges{laid_out})")
    return 0
