"""``graphtool report``: one self-contained HTML page with every fact about a model."""

from __future__ import annotations

import os
import shlex
from pathlib import Path
from typing import Optional

import typer

from graphtool.cli import console, options


def register(app: typer.Typer) -> None:
    app.command(
        "report",
        short_help="Write one self-contained HTML report of everything.",
        help=(
            "Write one self-contained HTML report: summary, findings with their source and fix, each region's\n"
            "forward and backward pictures (pan, zoom, fold by module, search, click a node for its facts),\n"
            "mutations, devices, the CUDA-graph verdict and memory. Opens offline in any browser.\n\n"
        ) + options.examples(
            "graphtool report model.py -o report.html",
            "graphtool report model.py:build --device meta --no-memory",
            "graphtool report model.py --fsdp2 --world-size 8 -o fsdp2.html",
            "graphtool report model.py --fit 24GiB --budgets   # and will it fit",
            "graphtool report model.py --schedule   # and the loop's shapes",
        ),
    )(report)


def report(
    model: Optional[str] = options.ModelArg,
    entry: Optional[str] = options.EntryOpt,
    device: Optional[str] = options.DeviceOpt,
    inference: bool = options.InferenceOpt,
    backend: str = options.BackendOpt,
    output: Optional[Path] = typer.Option(None, "--output", "-o", help="The HTML file (default: MODEL-report.html here)."),
    memory: bool = typer.Option(True, "--memory/--no-memory", help="Measure what training saves for backward (one more eager forward)."),
    layout_timeout: float = typer.Option(30.0, "--layout-timeout", help="Seconds one picture's layout may take; a slower one is left out (the page says so)."),
    timeout: Optional[float] = options.TimeoutOpt,
    ddp: bool = options.DdpOpt,
    world_size: int = options.WorldSizeOpt,
    bucket_cap_mb: float = options.BucketCapOpt,
    find_unused: bool = options.FindUnusedOpt,
    fsdp2: bool = options.Fsdp2Opt,
    fit: Optional[str] = typer.Option(
        None, "--fit", metavar="SIZE|GPU",
        help="A 'Will it fit' section: the training step's predicted peak, its live-bytes timeline as a picture, and "
             "whether it fits this size or GPU (as graphtool memory --fit).",
    ),
    budgets: Optional[str] = typer.Option(
        None, "--budgets", metavar="[LIST]",
        help="With it, torch's activation_memory_budget swept (alone: 1,0.8,0.6,0.4,0.2,0), as graphtool memory --budgets.",
    ),
    schedule: bool = typer.Option(
        False, "--schedule",
        help="A section with the loop over the script's get_input_schedule(), as graphtool shapes predicts it.",
    ),
    log: Optional[list[str]] = typer.Option(
        None, "--log", metavar="PATH",
        help="A real run's TORCH_TRACE logs (a folder, .log or .log.gz; repeatable): a section with each fact of the run "
             "beside this prediction, as graphtool log --against.",
    ),
) -> int:
    fsdp2_settings = options.fsdp2_options(fsdp2, ddp, world_size)
    ddp_settings = options.ddp_options(ddp, world_size, bucket_cap_mb, find_unused)
    from graphtool.commands.fit import check_fit

    check_fit(fit, budgets, ddp=ddp_settings, fsdp2=fsdp2_settings)
    if (fit is not None or budgets is not None) and (not memory or inference):
        from graphtool.errors import UsageError

        flag = "--no-memory" if not memory else "--inference"
        raise UsageError(f"--fit/--budgets with {flag}: the step's peak needs the memory of a training step",
                         hint=f"drop {flag}")
    if model:  # before torch is imported: a wrong path costs no seconds
        from graphtool.capture.user.script import check_script_path

        check_script_path(model)
    from graphtool.commands import shared
    from graphtool.commands.report import default_output

    targets = shared.targets(model, entry)
    if output is None:
        output = default_output(targets[0][0]) if len(targets) == 1 else Path("report.html")
    _check_output(output)
    target = Path(os.path.abspath(output))  # a script that calls os.chdir() must not move the file
    from dataclasses import replace

    from graphtool.commands.report import report as run
    from graphtool.render.documents import write_atomic

    with console.RichProgress() as progress, options.time_limit(timeout):
        results = run(model, entry=entry, device=device, inference=inference, backend=backend, memory=memory, layout_timeout=layout_timeout,
                      debug=options.debug_enabled(), progress=progress, ddp=ddp_settings,
                      fsdp2=fsdp2_settings, fit=fit, budgets=budgets, schedule=schedule, log=log)
        progress.phase("writing the page...")
        command = _command(model, ("--entry", entry, None), ("--device", device, None), ("--inference", inference, False),
                           ("--backend", backend, "inductor"), ("-o", output, None), ("--no-memory", not memory, False),
                           ("--layout-timeout", layout_timeout, 30.0), ("--ddp", ddp, False),
                           ("--fsdp2", fsdp2, False), ("--world-size", world_size if ddp or fsdp2 else None, 2),
                           ("--bucket-cap-mb", bucket_cap_mb if ddp else None, 25.0),
                           ("--find-unused-parameters", find_unused, False), ("--fit", fit, None),
                           ("--budgets", budgets, None), ("--schedule", schedule, False))
        results = [replace(r, made_by=command) for r in results]
        pages = [r.html() for r in results]
    for result, page in zip(results, pages):
        path = target if len(pages) == 1 else target.with_name(f"{target.stem}-{Path(result.target.split(':')[0]).stem}{target.suffix}")
        write_atomic(path, page)
        shown = output if len(pages) == 1 else path
        console.say(f"wrote {shown} ({len(page.encode('utf-8')) / 1e6:.2f} MB): {result.summary()}")
    return 0


def _command(model: Optional[str], *options) -> str:
    """The command line that makes this report again (the options given, not graphtool's own argv:
    ``run([...])`` in-process has none)."""
    from graphtool.display_paths import display_path

    parts = ["graphtool", "report"] + ([display_path(model)] if model else [])
    for flag, value, default in options:
        if value == default or value is None:
            continue
        parts += [flag] if value is True else [flag, str(value)]
    return " ".join(shlex.quote(p) for p in parts)


def _check_output(output: Path) -> None:
    """A folder, or a path under a file, is refused before any tracing is spent."""
    from graphtool.errors import UsageError

    if output.is_dir():
        raise UsageError(f"cannot write {output}: it is a folder", hint="give a file name, e.g. -o report.html")
    blocker = next((p for p in output.parents if p.exists() and not p.is_dir()), None)
    if blocker is not None:
        raise UsageError(f"cannot write {output}: {blocker} is a file, not a folder", hint="choose a writable output path")
