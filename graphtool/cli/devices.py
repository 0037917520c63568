"""``graphtool devices``: which device every node would run on, on a GPU."""

from __future__ import annotations

import typer

from graphtool.cli import options


def register(app: typer.Typer) -> None:
    options.register(app, "devices", (
        "Which device every node would run on, on a GPU: nodes off the main device and every\n"
        "cross-device copy, with the user's file and line. Without a GPU the meta device stands in.\n\n"
    ) + options.examples(
        "graphtool devices model.py",
        "graphtool devices model.py --format json --check",
    ))
