"""``graphtool trace``: forward and backward graphs of every compiled region, every input named."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from graphtool.cli import console, options


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
    model: Optional[str] = options.ModelArg,
    entry: Optional[str] = options.EntryOpt,
    device: Optional[str] = options.DeviceOpt,
    inference: bool = options.InferenceOpt,
    backend: str = options.BackendOpt,
    fmt: str = options.FormatOpt,
    out: Optional[Path] = typer.Option(None, "--out", "-o", help="Also write forward.py, backward.py and report.json into this folder."),
    with_cudagraphs: Optional[str] = typer.Option(
        None, "--cudagraphs", help="Add the CUDA-graph verdict for this backend (inductor or cudagraphs); costs a second, stand-in trace."
    ),
    with_bench: bool = typer.Option(False, "--bench", help="Add `graphtool bench` timings (eager vs torch.compile, defaults) to the report."),
) -> int:
    from graphtool.commands.trace import trace as run_trace

    options.check_format(fmt)
    with console.RichProgress() as progress:
        results = run_trace(model, entry=entry, device=device, inference=inference, backend=backend, cudagraphs=with_cudagraphs,
                            bench=with_bench, graph_code=out is not None, debug=options.debug_enabled(),
                            progress=progress)
    for result in results:
        if out is not None:
            folder = Path(out) if len(results) == 1 else Path(out) / Path(result.target).stem
            _write_out(result, folder)
        if fmt == "table":
            from graphtool.render.trace import trace_view

            console.stdout_console().print(trace_view(result.report))
            if result.verdict is not None:
                from graphtool.render.cudagraphs import cudagraphs_view

                console.stdout_console().print(cudagraphs_view(result.verdict))
    if fmt != "table":
        console.emit_all([r.to_dict() for r in results], fmt)
    return 0


def _write_out(result, folder: Path) -> None:
    from graphtool.render.documents import format_json, write_all

    files = {folder / name: text for name, text in (result.graph_code or {}).items()}
    files[folder / "report.json"] = format_json(result.to_dict())
    write_all(files)
    console.say(f"wrote {len(files)} files to {folder}")
