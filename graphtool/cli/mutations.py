"""``graphtool mutations``: which inputs the model mutates and which outputs alias inputs."""

from __future__ import annotations

from typing import Optional

import typer

from graphtool.cli import console, options


def register(app: typer.Typer) -> None:
    app.command(
        "mutations",
        help=(
            "Which inputs the model mutates (and how, and where), and which outputs alias inputs.\n\n"
            "Examples:\n\n"
            "  graphtool mutations model.py\n\n"
            "  graphtool mutations model.py --all --format json\n\n"
            "  graphtool mutations model.py --check    # exit 1 if anything is mutated or aliased"
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
) -> int:
    from graphtool.commands.mutations import mutations as run
    from graphtool.render.mutations import mutations_view

    options.check_format(fmt)
    with console.RichProgress() as progress:
        results = run(model, entry=entry, device=device, inference=inference, backend=backend,
                      debug=options.debug_enabled(), progress=progress)
    return console.show_models(results, fmt, lambda r: mutations_view(r.report, show_all=show_all), check)
