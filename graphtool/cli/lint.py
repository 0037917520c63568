"""``graphtool lint``: a CI gate for graph breaks and recompiles, with budgets and a baseline."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Optional

import typer

from graphtool.cli import console, options
from graphtool.display_paths import display_path
from graphtool.errors import UsageError

LINT_FORMATS = ("text", "json", "sarif", "junit", "github", "html")


def register(app: typer.Typer) -> None:
    app.command(
        "lint",
        short_help="A CI gate for graph breaks, recompiles and skipped frames.",
        context_settings={"allow_extra_args": True, "ignore_unknown_options": True},
        help=(
            "Compile each model with a recording backend (no code generation) and report graph breaks,\n"
            "recompiles and skipped frames; fail when over budget or when breaks are new.\n\n"
            "There is no budget by default: with no --max-* option, config budget or --baseline, lint reports\n"
            "what it finds and passes.\n\n"
            "Exit codes: 0 within budget, 1 over budget or new breaks, 2 could not lint.\n\n"
        ) + options.examples(
            "graphtool lint model.py --max-graph-breaks 0",
            "graphtool lint                           # the models in graphtool.yaml",
            "graphtool lint --run train.py -- --epochs 1   # any script, unchanged",
            "graphtool lint model.py --schedule --max-recompiles 1  # a loop's shapes",
            "graphtool lint --baseline gb.json --format sarif -o lint.sarif",
            "graphtool lint --log trace --max-graph-breaks 0   # a real run",
        ),
    )(lint)


def _table(name: str):
    """The flag of an option the table declares (lint's own, or the Session's)."""
    from graphtool.commands.options import COMMANDS

    return options.flag(COMMANDS["lint"].option(name))


def lint(
    ctx: typer.Context,
    models: Optional[list[str]] = typer.Argument(None, help="Model scripts (path.py or path.py:FACTORY). Default: the config's models.", show_default=False),
    run_script: Optional[str] = typer.Option(
        None, "--run", help="Run this script unchanged (as __main__), every torch.compile redirected; arguments after --."
    ),
    max_graph_breaks: Optional[int] = _table("max_graph_breaks"),
    max_recompiles: Optional[int] = _table("max_recompiles"),
    max_skipped_frames: Optional[int] = _table("max_skipped_frames"),
    dynamic: bool = _table("dynamic"),
    max_peak_memory: Optional[str] = _table("max_peak_memory"),
    min_coverage: Optional[float] = _table("min_coverage"),
    max_compile_seconds: Optional[float] = _table("max_compile_seconds"),
    coverage: bool = _table("coverage"),
    schedule: bool = typer.Option(
        False, "--schedule",
        help="Also run each step the script's get_input_schedule() yields (as graphtool shapes reads it): recompiles are "
             "the loop's own, and a frame that hits torch's recompile_limit fails lint whatever the budget.",
    ),
    config: Optional[Path] = typer.Option(None, "--config", help="Config file (default: graphtool.yaml or [tool.graphtool] in pyproject.toml)."),
    baseline: Optional[Path] = _table("baseline"),
    update_baseline: bool = typer.Option(False, "--update-baseline", help="Write the current breaks to the baseline file and pass."),
    strict: bool = typer.Option(False, "--strict", help="Also fail when a baselined break no longer occurs (keeps the baseline tight)."),
    fmt: str = typer.Option("text", "--format", "-f", help="text, json, sarif, junit, github or html (one self-contained page)."),
    output: Optional[Path] = typer.Option(None, "--output", "-o", help="Write the report here; the terminal still gets the summary."),
    jobs: Optional[int] = typer.Option(None, "--jobs", "-j", help="Models linted in parallel, each in its own process (default 1)."),
    timeout: Optional[float] = typer.Option(None, "--timeout", help="Seconds each model may take (default: no limit)."),
    ddp: bool = _table("ddp"),
    world_size: int = _table("world_size"),
    bucket_cap_mb: float = _table("bucket_cap_mb"),
    fsdp2: bool = _table("fsdp2"),
    log: Optional[list[str]] = typer.Option(
        None, "--log", metavar="PATH",
        help="Judge a real run's TORCH_TRACE logs (a folder, .log or .log.gz; repeatable) instead of running a model: "
             "its breaks and recompiles, every rank, with the same budgets, baseline and formats.",
    ),
) -> int:
    """The gate lints many models, each in a child process of its own (:func:`graphtool.commands.lint.lint`); in
    Python, ``graphtool.load(model).lint(...)`` lints one model in the session's own process."""
    if fmt not in LINT_FORMATS:
        raise UsageError(f"--format {fmt!r} is not one of {', '.join(LINT_FORMATS)}")
    if not log:
        _check_paths(models if not run_script else [], run_script)
    # absolute now: every output lands where it was asked for, whatever folder the run ends in
    output, baseline, config = (Path(os.path.abspath(p)) if p is not None else None for p in (output, baseline, config))
    from graphtool.commands.launch import launch_from
    from graphtool.commands.lint import lint as run

    launch = launch_from({"ddp": ddp, "fsdp2": fsdp2, "world_size": world_size, "bucket_cap_mb": bucket_cap_mb})
    with console.RichProgress() as progress:
        outcome = run(models, run=run_script, script_args=ctx.args, max_graph_breaks=max_graph_breaks,
                      max_recompiles=max_recompiles, max_skipped_frames=max_skipped_frames, dynamic=dynamic, config=config, baseline=baseline,
                      update_baseline=update_baseline, strict=strict, jobs=jobs, timeout=timeout, debug=options.debug_enabled(),
                      progress=progress, ddp=launch, schedule=schedule,
                      max_peak_memory=max_peak_memory, min_coverage=min_coverage, coverage=coverage, log=log,
                      max_compile_seconds=max_compile_seconds)
    _emit(outcome, fmt, output)
    if outcome.baseline_refused:  # after the report, which says what failed
        raise UsageError(outcome.baseline_refused, hint="fix or remove the models that could not be linted, then update")
    return outcome.exit_code()


def _check_paths(models, run_script: Optional[str]) -> None:
    """Each MODEL (and the --run script) exists and is readable, before torch is imported."""
    from graphtool.capture.user.script import check_script_path

    for m in models or []:
        check_script_path(m)
    if run_script is not None and not Path(run_script).is_file():
        raise UsageError(f"{run_script}: no such file" if not Path(run_script).exists() else f"{run_script}: is not a file")


def _emit(outcome, fmt: str, output: Optional[Path]) -> None:
    from graphtool.render import lint as render
    from graphtool.render.documents import format_json, write_atomic

    report = outcome.report
    text = {
        "json": lambda: format_json(outcome.to_dict()),
        "sarif": lambda: render.format_sarif(report),
        "junit": lambda: render.format_junit(report),
        "github": lambda: render.format_github(report),
        "html": lambda: _html(report),
    }.get(fmt)
    if output is not None:
        if text is None:
            import io

            from rich.console import Console

            from graphtool.render.theme import THEME

            # rich's capture() keeps what it captured out of the record: print to a scratch file, export the record
            recorder = Console(file=io.StringIO(), record=True, width=120, theme=THEME, color_system=None)
            recorder.print(outcome, soft_wrap=True)
            write_atomic(output, recorder.export_text())
        else:
            write_atomic(output, text())
        console.print_view(outcome, console.stderr_console())
        console.say(f"report written to {display_path(str(output))}")
    elif text is None:
        console.print_view(outcome)
    else:
        sys.stdout.write(text())
        if outcome.verdict():
            console.say(outcome.verdict())


def _html(report) -> str:
    from graphtool.render.lint_html import format_html

    return format_html(report)
