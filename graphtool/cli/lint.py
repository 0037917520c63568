"""``graphtool lint``: a CI gate for graph breaks and recompiles, with budgets and a baseline."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Optional

import typer

from graphtool.cli import console, options
from graphtool.commands.options import COMMANDS, LOAD
from graphtool.display_paths import display_path
from graphtool.errors import UsageError

LINT_FORMATS = ("text", "json", "sarif", "junit", "github", "html")


def register(app: typer.Typer) -> None:
    import inspect

    cmd = COMMANDS["lint"]
    P = inspect.Parameter
    lint.__signature__ = inspect.Signature(
        [P("ctx", P.POSITIONAL_OR_KEYWORD, annotation=typer.Context),
         P("models", P.POSITIONAL_OR_KEYWORD, annotation=Optional[list[str]], default=typer.Argument(
             None, help="Model scripts (path.py or path.py:FACTORY). Default: the config's models.", show_default=False))]
        + options.parameters([o for o in cmd.options if o.flag is not None] + [o for o in LOAD if o.name in cmd.load]))
    app.command(
        "lint",
        short_help=cmd.summary,
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


def lint(ctx: typer.Context, models: Optional[list[str]] = None, **given) -> int:
    """The gate lints many models, each in a child process of its own (:func:`graphtool.commands.lint.lint`), its flags
    the option table's (:data:`~graphtool.commands.options.COMMANDS`); in Python, ``graphtool.load(model).lint(...)``
    lints one model in the session's own process."""
    fmt, output = given.pop("format"), given.pop("output")
    if fmt not in LINT_FORMATS:
        raise UsageError(f"--format {fmt!r} is not one of {', '.join(LINT_FORMATS)}")
    if not given["log"]:
        _check_paths(models if not given["run"] else [], given["run"])
    # absolute now: every output lands where it was asked for, whatever folder the run ends in
    output, given["baseline"], given["config"] = (Path(os.path.abspath(p)) if p is not None else None
                                                  for p in (output, given["baseline"], given["config"]))
    from graphtool.commands.launch import launch_from
    from graphtool.commands.lint import lint as run

    launch = launch_from({name: given.pop(name) for name in COMMANDS["lint"].load})
    with console.RichProgress() as progress:
        outcome = run(models, script_args=ctx.args, debug=options.debug_enabled(), progress=progress, ddp=launch, **given)
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
