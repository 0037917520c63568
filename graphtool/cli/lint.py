"""``graphtool lint``: a CI gate for graph breaks and recompiles, with budgets and a baseline."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import List, Optional

import typer

from graphtool.cli import common
from graphtool.errors import UsageError

LINT_FORMATS = ("text", "json", "sarif", "junit", "github")


def register(app: typer.Typer) -> None:
    app.command(
        "lint",
        context_settings={"allow_extra_args": True, "ignore_unknown_options": True},
        help=(
            "Compile each model with a recording backend (no code generation) and report graph breaks,\n"
            "recompiles and skipped frames; fail when over budget or when breaks are new.\n\n"
            "Examples:\n\n"
            "  graphtool lint model.py --max-graph-breaks 0\n\n"
            "  graphtool lint                                   # the models in graphtool.yaml\n\n"
            "  graphtool lint --run train.py -- --epochs 1       # any script, unchanged\n\n"
            "  graphtool lint --baseline gb.json --format sarif --output lint.sarif\n\n"
            "Exit codes: 0 within budget, 1 over budget or new breaks, 2 could not lint."
        ),
    )(lint)


def lint(
    ctx: typer.Context,
    models: Optional[List[str]] = typer.Argument(None, help="Model scripts (path.py or path.py:FACTORY). Default: the config's models.", show_default=False),
    run: Optional[str] = typer.Option(None, "--run", help="Run this script unchanged (as __main__), every torch.compile redirected; arguments after --."),
    max_graph_breaks: Optional[int] = typer.Option(None, "--max-graph-breaks", help="Fail when a model has more graph breaks."),
    max_recompiles: Optional[int] = typer.Option(None, "--max-recompiles", help="Fail when a model recompiles more often."),
    dynamic: bool = typer.Option(False, "--dynamic", help="Also run differently-sized inputs (the script's dynamic_inputs, or batch + 1) to catch recompiles."),
    config: Optional[Path] = typer.Option(None, "--config", help="Config file (default: graphtool.yaml or [tool.graphtool] in pyproject.toml)."),
    baseline: Optional[Path] = typer.Option(None, "--baseline", help="Fail only on breaks not in this baseline file."),
    update_baseline: bool = typer.Option(False, "--update-baseline", help="Write the current breaks to the baseline file and pass."),
    fmt: str = typer.Option("text", "--format", "-f", help="text, json, sarif, junit or github."),
    output: Optional[Path] = typer.Option(None, "--output", "-o", help="Write the report here; the terminal still gets the summary."),
    jobs: Optional[int] = typer.Option(None, "--jobs", "-j", help="Models linted in parallel, each in its own process (default 1)."),
    timeout: Optional[float] = typer.Option(None, "--timeout", help="Seconds each model may take (default: no limit)."),
) -> int:
    if fmt not in LINT_FORMATS:
        raise UsageError(f"--format {fmt!r} is not one of {', '.join(LINT_FORMATS)}")
    from graphtool.analysis.lint import Budget, LintReport, judge, make_baseline, validate_baseline
    from graphtool.config import find_config, load_config

    cfg_path = config or (find_config() if not models and not run else None)
    cfg = load_config(cfg_path) if cfg_path else None
    override = Budget(max_graph_breaks=max_graph_breaks, max_recompiles=max_recompiles)
    targets = _targets(models, run, ctx.args, cfg, override, dynamic)
    baseline_path = baseline or (cfg.baseline if cfg else None)
    if update_baseline and baseline_path is None:
        raise UsageError("--update-baseline needs --baseline FILE (or 'baseline' in the config)")
    base = None
    if baseline_path is not None and not update_baseline:
        if not baseline_path.is_file():
            raise UsageError(f"{baseline_path}: no such baseline file", hint="create it with --update-baseline")
        try:
            base = validate_baseline(json.loads(baseline_path.read_text(encoding="utf-8")), str(baseline_path))
        except json.JSONDecodeError as exc:
            raise UsageError(f"{baseline_path}:{exc.lineno}: not valid JSON: {exc.msg}") from None
    parallel = jobs or (cfg.jobs if cfg and cfg.jobs else 1)
    limit = timeout or (cfg.timeout if cfg else None)
    results = _run(targets, parallel, limit)
    report = LintReport(tuple(judge(t, r, baseline=base) for t, r in zip(targets, results)), str(baseline_path) if baseline_path else None)
    if update_baseline:
        from graphtool.render.serialize import format_json, write_atomic

        write_atomic(baseline_path, format_json(make_baseline(report)))
        common.stderr_console().print(f"wrote {baseline_path} ({sum(len(m.breaks) for m in report.models)} breaks)", markup=False, highlight=False)
    _emit(report, fmt, output)
    if update_baseline:
        return 2 if report.errored else 0
    return report.exit_code()


def _targets(models, run, extra_args, cfg, override, dynamic) -> list:
    from graphtool.analysis.lint import LintTarget

    if run:
        # with --run, everything after `--` belongs to the script (typer hands it over as MODELs)
        script_args = tuple(models or ()) + tuple(extra_args)
        return [LintTarget(path=run, run=True, args=script_args, budget=override)]
    if extra_args:
        raise UsageError(f"unexpected arguments: {' '.join(extra_args)} (script arguments go after --run SCRIPT --)")
    if models:
        from graphtool.capture.loader import split_target

        by_path = {str(m.path): m for m in cfg.models} if cfg else {}
        out = []
        for m in models:
            path, entry = split_target(m)
            base = by_path.get(str(Path(path).resolve()))
            out.append(LintTarget(path=path, entry=entry, dynamic=dynamic, budget=_merge(base, override)))
        return out
    if cfg is None:
        raise UsageError("nothing to lint: pass MODEL scripts or --run SCRIPT, or add graphtool.yaml with a 'models' list")
    if not cfg.models:
        raise UsageError(f"{cfg.file}: no models listed under 'models'")
    return [
        LintTarget(path=str(m.path), entry=m.entry, dynamic=dynamic or m.dynamic, budget=_merge(m, override))
        for m in cfg.models
    ]


def _merge(entry, override):
    from graphtool.analysis.lint import Budget

    pick = lambda flag, attr: flag if flag is not None else (getattr(entry, attr) if entry else None)  # noqa: E731
    return Budget(
        max_graph_breaks=pick(override.max_graph_breaks, "max_graph_breaks"),
        max_recompiles=pick(override.max_recompiles, "max_recompiles"),
        allowed_breaks=tuple(entry.allowed_breaks) if entry else (),
    )


def _run(targets, parallel: int, limit: float | None) -> list[dict]:
    from graphtool.capture.isolate import run_jobs

    from graphtool.capture import compat

    compat.check_installed_torch()  # torch runs only in the children: check (and warn) once, here
    debug = common.debug_enabled()
    jobs = [t.job(debug) for t in targets]
    if not sys.stderr.isatty():  # no progress bar to draw: skip rich's progress machinery
        return run_jobs(jobs, parallel=parallel, timeout=limit)
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    with Progress(TextColumn("linting"), BarColumn(), TextColumn("{task.completed}/{task.total}"), TimeElapsedColumn(),
                  console=common.stderr_console(), transient=True) as progress:
        task = progress.add_task("lint", total=len(targets))
        return run_jobs(jobs, parallel=parallel, timeout=limit, on_done=lambda i, r: progress.advance(task))


def _emit(report, fmt: str, output: Optional[Path]) -> None:
    import sys

    from graphtool.render import lint as render
    from graphtool.render.serialize import format_json, write_atomic

    text = {
        "json": lambda: format_json(report.to_dict()),
        "sarif": lambda: render.format_sarif(report),
        "junit": lambda: render.format_junit(report),
        "github": lambda: render.format_github(report),
    }.get(fmt)
    if output is not None:
        if text is None:
            from rich.console import Console

            console = Console(file=None, record=True, width=120)
            with console.capture():
                console.print(render.lint_view(report))
            write_atomic(output, console.export_text())
        else:
            write_atomic(output, text())
        common.stderr_console().print(render.lint_view(report))
        common.stderr_console().print(f"report written to {output}", markup=False, highlight=False)
    elif text is None:
        common.stdout_console().print(render.lint_view(report))
    else:
        sys.stdout.write(text())
