"""``graphtool mutations``, ``graphtool devices`` and ``graphtool cudagraphs``."""

from __future__ import annotations

from typing import Optional

import typer

from graphtool.cli import common
from graphtool.errors import EXIT_FINDINGS, EXIT_OK


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
    model: Optional[str] = common.ModelArg,
    entry: Optional[str] = common.EntryOpt,
    device: Optional[str] = common.DeviceOpt,
    inference: bool = common.InferenceOpt,
    show_all: bool = typer.Option(False, "--all", help="List every input, not only mutated ones."),
    fmt: str = common.FormatOpt,
    check: bool = common.CheckOpt,
) -> int:
    common.check_format(fmt)
    capture = common.load_and_trace(model, entry, device, inference, record_breaks=False)
    from graphtool.analysis.mutations import analyze_mutations

    report = analyze_mutations(capture)
    if fmt == "table":
        from graphtool.render.analyses import mutations_view

        common.stdout_console().print(mutations_view(report, show_all=show_all))
    else:
        common.emit(report.to_dict(), fmt)
    found = bool(report.mutated or report.aliased_outputs or report.input_aliases)
    return EXIT_FINDINGS if check and found else EXIT_OK
