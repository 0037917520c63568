"""``graphtool mutations``: which inputs the model mutates and which outputs alias inputs."""

from __future__ import annotations

import typer

from graphtool.cli import options


def register(app: typer.Typer) -> None:
    options.register(app, "mutations", (
        "Which inputs the model mutates (and how, and where), and which outputs alias inputs.\n\n"
    ) + options.examples(
        "graphtool mutations model.py",
        "graphtool mutations model.py --all --format json",
        "graphtool mutations model.py --check",
        "graphtool mutations model.py --check --allow buffers",
    ) + (
        "\n\n--check exits 1 when an input is mutated or an output aliases one; --allow\n"
        "accepts expected mutations: buffers, parameters, user_inputs, optimizer_state\n"
        "(what a training step's optimizer writes) or FQN patterns such as '*.k_cache'\n"
        "(or allow_mutations in graphtool.yaml)."
    ))
