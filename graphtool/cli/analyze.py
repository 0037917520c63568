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


def _each_model(model, entry, fmt: str, one) -> bool:
    """Run ``one(target, entry) -> (doc, view, found)`` per model; print tables or one document."""
    docs, found = [], False
    for target, ent in common.targets(model, entry):
        doc, view, hit = one(target, ent)
        found |= hit
        if fmt == "table":
            common.stdout_console().print(view())
        docs.append(doc)
    if fmt != "table":
        common.emit_all(docs, fmt)
    return found


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
    from graphtool.render.analyses import mutations_view

    def one(target, ent):
        capture = common.load_and_trace(target, ent, device, inference, record_breaks=False)
        report = analyze_mutations(capture)
        hit = bool(report.mutated or report.aliased_outputs or report.input_aliases)
        doc = {"model": common.model_header(capture), **report.to_dict()}
        return doc, lambda: mutations_view(report, show_all=show_all), hit

    found = _each_model(model, entry, fmt, one)
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
    from graphtool.render.analyses import devices_view

    def one(target, ent):
        capture, accel = common.load_and_trace_standin(target, ent, device, inference)
        stand_in = "meta stands for cuda:0" if accel == "meta" else None
        report = device_report(capture, main_device=accel, stand_in=stand_in)
        doc = {"model": common.model_header(capture), "devices": report.to_dict()}
        return doc, lambda: devices_view(report), report.found

    found = _each_model(model, entry, fmt, one)
    return EXIT_FINDINGS if check and found else EXIT_OK


def cudagraphs(
    model: Optional[str] = common.ModelArg,
    entry: Optional[str] = common.EntryOpt,
    device: Optional[str] = common.DeviceOpt,
    inference: bool = common.InferenceOpt,
    backend: str = typer.Option("inductor", "--backend", help='inductor (mode="reduce-overhead") or cudagraphs (backend="cudagraphs").'),
    dynamic: bool = typer.Option(False, "--dynamic", help="Also run a second input size (the script's dynamic_inputs, else batch + 1), as a model serving several sizes would."),
    fmt: str = common.FormatOpt,
    check: bool = common.CheckOpt,
) -> int:
    common.check_format(fmt)
    from graphtool.analysis.cudagraphs import check_backend, cudagraph_verdict
    from graphtool.render.analyses import cudagraphs_view

    check_backend(backend)

    def one(target, ent):
        capture, accel = common.load_and_trace_standin(target, ent, device, inference, backend=backend, dynamic=dynamic)
        verdict = cudagraph_verdict(capture, backend=backend, predicted=accel == "meta")
        doc = {"model": common.model_header(capture), "cudagraphs": verdict.to_dict()}
        return doc, lambda: cudagraphs_view(verdict, capture.stopped), any(r.skips for r in verdict.reasons)

    found = _each_model(model, entry, fmt, one)
    return EXIT_FINDINGS if check and found else EXIT_OK
