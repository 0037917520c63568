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
    from graphtool.analysis.mutations import analyze_mutations

    docs, found = [], False
    for target, ent in common.targets(model, entry):
        capture = common.load_and_trace(target, ent, device, inference, record_breaks=False)
        report = analyze_mutations(capture)
        found |= bool(report.mutated or report.aliased_outputs or report.input_aliases)
        if fmt == "table":
            from graphtool.render.analyses import mutations_view

            common.stdout_console().print(mutations_view(report, show_all=show_all))
        docs.append({"model": common.model_header(capture), **report.to_dict()})
    if fmt != "table":
        common.emit_all(docs, fmt)
    return EXIT_FINDINGS if check and found else EXIT_OK


def devices(
    model: Optional[str] = common.ModelArg,
    entry: Optional[str] = common.EntryOpt,
    device: Optional[str] = common.DeviceOpt,
    inference: bool = common.InferenceOpt,
    fmt: str = common.FormatOpt,
    check: bool = common.CheckOpt,
) -> int:
    common.check_format(fmt)
    from graphtool.analysis.devices import device_report

    docs, found = [], False
    for target, ent in common.targets(model, entry):
        capture, accel = common.load_and_trace_standin(target, ent, device, inference)
        report = device_report(
            capture,
            main_device=accel,
            stand_in="meta stands for cuda:0" if accel == "meta" else None,
        )
        found |= report.found
        if fmt == "table":
            from graphtool.render.analyses import devices_view

            common.stdout_console().print(devices_view(report))
        docs.append({"model": common.model_header(capture), "devices": report.to_dict()})
    if fmt != "table":
        common.emit_all(docs, fmt)
    return EXIT_FINDINGS if check and found else EXIT_OK


def cudagraphs(
    model: Optional[str] = common.ModelArg,
    entry: Optional[str] = common.EntryOpt,
    device: Optional[str] = common.DeviceOpt,
    inference: bool = common.InferenceOpt,
    backend: str = typer.Option("inductor", "--backend", help='inductor (mode="reduce-overhead") or cudagraphs (backend="cudagraphs").'),
    fmt: str = common.FormatOpt,
    check: bool = common.CheckOpt,
) -> int:
    common.check_format(fmt)
    from graphtool.analysis.cudagraphs import BACKENDS, cudagraph_verdict

    if backend not in BACKENDS:
        from graphtool.errors import UsageError

        raise UsageError(f"--backend {backend!r} is not one of {', '.join(BACKENDS)}")
    docs, found = [], False
    for target, ent in common.targets(model, entry):
        capture, accel = common.load_and_trace_standin(target, ent, device, inference, backend=backend)
        verdict = cudagraph_verdict(capture, backend=backend, predicted=accel == "meta")
        found |= any(r.skips for r in verdict.reasons)
        if fmt == "table":
            from graphtool.render.analyses import cudagraphs_view

            common.stdout_console().print(cudagraphs_view(verdict, capture.stopped))
        docs.append({"model": common.model_header(capture), "cudagraphs": verdict.to_dict()})
    if fmt != "table":
        common.emit_all(docs, fmt)
    return EXIT_FINDINGS if check and found else EXIT_OK
