"""``graphtool mutations``, ``graphtool devices`` and ``graphtool cudagraphs``: one report per model,
``--check`` exits 1 when anything is found."""

from __future__ import annotations

from typing import Optional

import typer

from graphtool.cli import console, options
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
    app.command(
        "devices",
        help=(
            "Which device every node would run on, on a GPU: nodes off the main device and every\n"
            "cross-device copy, with the user's file and line. Without a GPU the meta device stands in.\n\n"
            "Examples:\n\n"
            "  graphtool devices model.py\n\n"
            "  graphtool devices model.py --format json --check"
        ),
    )(devices)
    app.command(
        "cudagraphs",
        help=(
            "Would CUDA graphs be applied, region by region, and if not, why (torch's own checks,\n"
            "run on a stand-in trace: no GPU needed).\n\n"
            "Examples:\n\n"
            "  graphtool cudagraphs model.py                      # mode=\"reduce-overhead\"\n\n"
            "  graphtool cudagraphs model.py --backend cudagraphs --check"
        ),
    )(cudagraphs)


def _show(results, fmt: str, view, check: bool) -> int:
    """Print each model's table, or one document; the exit code ``--check`` asks for."""
    if fmt == "table":
        for r in results:
            if r.header.get("no_graph"):
                console.stdout_console().print(f"torch.compile captured no graph: {r.header['no_graph']}",
                                               style="verdict.bad", markup=False, highlight=False)
            console.stdout_console().print(view(r))
    else:
        console.emit_all([r.to_dict() for r in results], fmt)
    return EXIT_FINDINGS if check and any(r.found for r in results) else EXIT_OK


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
    from graphtool.render.analyses import mutations_view

    options.check_format(fmt)
    with console.RichProgress() as progress:
        results = run(model, entry=entry, device=device, inference=inference, backend=backend,
                      debug=options.debug_enabled(), progress=progress)
    return _show(results, fmt, lambda r: mutations_view(r.report, show_all=show_all), check)


def devices(
    model: Optional[str] = options.ModelArg,
    entry: Optional[str] = options.EntryOpt,
    device: Optional[str] = options.DeviceOpt,
    inference: bool = options.InferenceOpt,
    backend: str = options.BackendOpt,
    fmt: str = options.FormatOpt,
    check: bool = options.CheckOpt,
) -> int:
    from graphtool.commands.devices import devices as run
    from graphtool.render.analyses import devices_view

    options.check_format(fmt)
    with console.RichProgress() as progress:
        results = run(model, entry=entry, device=device, inference=inference, backend=backend,
                      debug=options.debug_enabled(), progress=progress)
    return _show(results, fmt, lambda r: devices_view(r.report), check)


def cudagraphs(
    model: Optional[str] = options.ModelArg,
    entry: Optional[str] = options.EntryOpt,
    device: Optional[str] = options.DeviceOpt,
    inference: bool = options.InferenceOpt,
    backend: str = typer.Option("inductor", "--backend", help='inductor (mode="reduce-overhead") or cudagraphs (backend="cudagraphs").'),
    dynamic: bool = typer.Option(
        False, "--dynamic",
        help="Also run a second input size (the script's dynamic_inputs, else batch + 1), as a model serving several sizes would.",
    ),
    fmt: str = options.FormatOpt,
    check: bool = options.CheckOpt,
) -> int:
    from graphtool.commands.cudagraphs import cudagraphs as run
    from graphtool.render.analyses import cudagraphs_view

    options.check_format(fmt)
    with console.RichProgress() as progress:
        results = run(model, entry=entry, device=device, inference=inference, backend=backend, dynamic=dynamic,
                      debug=options.debug_enabled(), progress=progress)
    return _show(results, fmt, lambda r: cudagraphs_view(r.report, r.stopped), check)
