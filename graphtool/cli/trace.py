"""``graphtool trace``: forward and backward graphs of every compiled region, every input named."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from graphtool.cli import common


def register(app: typer.Typer) -> None:
    app.command(
        "trace",
        help=(
            "Trace a model through dynamo and AOT autograd and report its graphs.\n\n"
            "Examples:\n\n"
            "  graphtool trace                       # the bundled example\n\n"
            "  graphtool trace model.py --format json > report.json\n\n"
            "  graphtool trace model.py:build --device meta --out traced/"
        ),
    )(trace)


def trace(
    model: Optional[str] = common.ModelArg,
    entry: Optional[str] = common.EntryOpt,
    device: Optional[str] = common.DeviceOpt,
    inference: bool = common.InferenceOpt,
    fmt: str = common.FormatOpt,
    out: Optional[Path] = typer.Option(None, "--out", "-o", help="Also write forward.py, backward.py and report.json into this folder."),
    with_cudagraphs: Optional[str] = typer.Option(
        None, "--cudagraphs", help="Add the CUDA-graph verdict for this backend (inductor or cudagraphs); costs a second, stand-in trace."
    ),
    with_bench: bool = typer.Option(False, "--bench", help="Add `graphtool bench` timings (eager vs torch.compile, defaults) to the report."),
) -> int:
    common.check_format(fmt)
    if with_cudagraphs:
        from graphtool.analysis.cudagraphs import check_backend

        check_backend(with_cudagraphs)
    from graphtool.analysis.trace_report import build_trace_report

    chosen = common.targets(model, entry)
    docs = []
    for target, ent in chosen:
        capture = common.load_and_trace(target, ent, device, inference)
        report = build_trace_report(capture)
        data = report.to_dict()
        verdict = None
        if with_cudagraphs:
            from graphtool.analysis.cudagraphs import cudagraph_verdict

            standin, accel = common.load_and_trace_standin(target, ent, device, inference, backend=with_cudagraphs)
            verdict = cudagraph_verdict(standin, backend=with_cudagraphs, predicted=accel == "meta")
            data["cudagraphs"] = verdict.to_dict()
        if with_bench:
            from graphtool.cli.bench import bench_report

            data["bench"] = bench_report(target, ent).to_dict()
        if out is not None:
            folder = Path(out) if len(chosen) == 1 else Path(out) / Path(target).stem
            _write_out(capture, folder, data)
        if fmt == "table":
            from graphtool.render.trace import trace_view

            common.stdout_console().print(trace_view(report))
            if verdict is not None:
                from graphtool.render.analyses import cudagraphs_view

                common.stdout_console().print(cudagraphs_view(verdict))
        docs.append(data)
    if fmt != "table":
        common.emit_all(docs, fmt)
    return 0


def _write_out(capture, folder: Path, data: dict) -> None:
    from graphtool.render.graph_code import graph_files
    from graphtool.render.documents import write_all

    files = graph_files(capture, folder)
    files[folder / "report.json"] = _json(data)
    write_all(files)
    common.stderr_console().print(f"wrote {len(files)} files to {folder}", markup=False, highlight=False)


def _json(data: dict) -> str:
    from graphtool.render.documents import format_json

    return format_json(data)
