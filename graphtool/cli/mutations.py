"""``graphtool mutations``: which inputs the model mutates and which outputs alias inputs."""

from __future__ import annotations

from typing import Optional

import typer

from graphtool.cli import console, options


def register(app: typer.Typer) -> None:
    app.command(
        "mutations",
        short_help="Inputs the model mutates, and outputs that alias inputs.",
        help=(
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
        ),
    )(mutations)


def mutations(
    model: Optional[str] = options.ModelArg,
    entry: Optional[str] = options.EntryOpt,
    device: Optional[str] = options.DeviceOpt,
    inference: bool = options.InferenceOpt,
    backend: str = options.BackendOpt,
    show_all: bool = typer.Option(False, "--all", help="List every input, not only mutated ones."),
    fmt: str = options.FormatOpt,
    check: bool = options.CheckOpt,
    allow: Optional[list[str]] = typer.Option(
        None, "--allow", help="Mutations that are expected: buffers, parameters, user_inputs, optimizer_state, or an FQN pattern ('*.k_cache'); repeatable. "
             "Adds to allow_mutations in graphtool.yaml."
    ),
    timeout: Optional[float] = options.TimeoutOpt,
) -> int:
    from graphtool.commands.mutations import mutations as run

    options.check_format(fmt)
    with console.RichProgress() as progress, options.time_limit(timeout):
        results = run(model, entry=entry, device=device, inference=inference, backend=backend, allow=tuple(allow or ()),
                      debug=options.debug_enabled(), progress=progress)
    return console.show_models(results, fmt, check, show_all=show_all)
