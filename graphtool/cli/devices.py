"""``graphtool devices``: which device every node would run on, on a GPU."""

from __future__ import annotations

from typing import Optional

import typer

from graphtool.cli import console, options


def register(app: typer.Typer) -> None:
    app.command(
        "devices",
        short_help="Which device every node would run on, on a GPU.",
        help=(
            "Which device every node would run on, on a GPU: nodes off the main device and every\n"
            "cross-device copy, with the user's file and line. Without a GPU the meta device stands in.\n\n"
        ) + options.examples(
            "graphtool devices model.py",
            "graphtool devices model.py --format json --check",
        ),
    )(devices)


def devices(
    model: Optional[str] = options.ModelArg,
    entry: Optional[str] = options.EntryOpt,
    device: Optional[str] = options.DeviceOpt,
    inference: bool = options.InferenceOpt,
    backend: str = options.BackendOpt,
    fmt: str = options.FormatOpt,
    check: bool = options.CheckOpt,
    timeout: Optional[float] = options.TimeoutOpt,
) -> int:
    from graphtool.commands.devices import devices as run

    options.check_format(fmt)
    with console.RichProgress() as progress, options.time_limit(timeout):
        results = run(model, entry=entry, device=device, inference=inference, backend=backend,
                      debug=options.debug_enabled(), progress=progress)
    return console.show_models(results, fmt, check)
