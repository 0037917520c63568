"""``graphtool lint``: graph breaks, recompiles and skipped frames against budgets and a baseline.

Each model (or script) is linted in its own child process; this function gathers the targets from
the arguments and the config, runs them, judges them and, with ``update_baseline``, writes the
baseline file.

Example::

    >>> out = lint(["examples/graph_breaks.py"], max_graph_breaks=0)
    >>> out.report.exit_code()
    1
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from graphtool.commands import baseline as baselines
from graphtool.commands.progress import SILENT, Progress
from graphtool.display_paths import display_path
from graphtool.errors import EXIT_USAGE, UsageError


@dataclass(frozen=True)
class LintOutcome:
    report: object  # LintReport
    baseline_written: Optional[Path] = None  # where --update-baseline wrote, when it did
    baseline_refused: Optional[str] = None  # why --update-baseline did not write, when it did not

    def exit_code(self) -> int:
        if self.baseline_refused is not None:
            return EXIT_USAGE
        if self.baseline_written is not None:
            return 2 if self.report.errored else 0
        return self.report.exit_code()


def lint(models: Optional[Sequence[str]] = None, *, run: Optional[str] = None, script_args: Sequence[str] = (),
         max_graph_breaks: Optional[int] = None, max_recompiles: Optional[int] = None,
         max_skipped_frames: Optional[int] = None, dynamic: bool = False,
         config: Optional[Path] = None, baseline: Optional[Path] = None, update_baseline: bool = False, strict: bool = False,
         jobs: Optional[int] = None, timeout: Optional[float] = None, debug: bool = False,
         progress: Progress = SILENT, ddp: Optional[dict] = None, fsdp2: Optional[dict] = None) -> LintOutcome:
    """Lint every target; judge each against its budget and the baseline.

    With ``update_baseline`` the baseline is written only when every model was linted: a model that
    could not be (an error, a crash, a timeout) leaves the old file exactly as it was."""
    from graphtool.analysis.lint import Budget, LintReport
    from graphtool.config import find_config, load_config

    _check_numbers(max_graph_breaks=max_graph_breaks, max_recompiles=max_recompiles,
                   max_skipped_frames=max_skipped_frames, jobs=jobs, timeout=timeout)
    cfg_path = config or (find_config() if not models and not run else None)
    cfg = load_config(cfg_path) if cfg_path else None
    override = Budget(max_graph_breaks=max_graph_breaks, max_recompiles=max_recompiles, max_skipped_frames=max_skipped_frames)
    targets = _targets(models, run, script_args, cfg, override, dynamic)
    if ddp is not None:  # each model runs as DDP(torch.compile(model)) in its child, in torch's fake process group
        if run:
            raise UsageError("--ddp lints a model script; a script run with --run wraps its model itself")
        from dataclasses import replace

        targets = [replace(t, ddp=(ddp["world_size"], ddp["bucket_cap_mb"])) for t in targets]
    if fsdp2 is not None:  # each model runs under fully_shard in its child's fake process group
        if run:
            raise UsageError("--fsdp2 lints a model script; a script run with --run shards its model itself")
        if ddp is not None:
            raise UsageError("--fsdp2 with --ddp: a model runs under one of them, not both")
        from dataclasses import replace

        targets = [replace(t, fsdp2=fsdp2["world_size"]) for t in targets]
    baseline_path = baseline or (cfg.baseline if cfg else None)
    if update_baseline and baseline_path is None:
        raise UsageError("--update-baseline needs --baseline FILE (or 'baseline' in the config)")
    base = baselines.read(Path(baseline_path)) if baseline_path is not None and not update_baseline else None
    parallel = jobs or (cfg.jobs if cfg and cfg.jobs else 1)
    limit = timeout or (cfg.timeout if cfg else None)
    results = _run(targets, parallel, limit, debug, progress)
    report = LintReport(tuple(baselines.judge(t, r, base, strict=strict) for t, r in zip(targets, results)),
                        display_path(str(baseline_path)) if baseline_path else None)
    if not update_baseline:
        return LintOutcome(report)
    if report.errored:
        failed = [m.target.name for m in report.models if m.status == "error"]
        return LintOutcome(report, baseline_refused=(
            f"{display_path(str(baseline_path))} not updated: {len(failed)} of {len(report.models)} models could not be linted "
            f"({', '.join(display_path(n) or n for n in failed)}); a baseline needs every model, so the old file is unchanged"))
    baseline_path = Path(baseline_path)
    baselines.write(baseline_path, baselines.content(report, baseline_path))
    return LintOutcome(report, baseline_written=baseline_path)


def _check_numbers(**values) -> None:
    """Budgets are counts (0 or more), ``jobs`` at least 1, ``timeout`` seconds above 0."""
    for name, value in values.items():
        if value is None:
            continue
        flag = "--" + name.replace("_", "-")
        if name == "timeout":
            from graphtool.capture.deadline import check_timeout

            check_timeout(value, flag)
        elif name == "jobs":
            if value < 1:
                raise UsageError(f"{flag} must be 1 or more, got {value}")
        elif value < 0:
            raise UsageError(f"{flag} must be 0 or more, got {value}")


def _targets(models, run, extra_args, cfg, override, dynamic) -> list:
    from graphtool.analysis.lint import LintTarget

    if run:
        # with --run, everything after `--` belongs to the script (typer hands it over as MODELs)
        script_args = tuple(models or ()) + tuple(extra_args)
        return [LintTarget(path=run, run=True, args=script_args, budget=override)]
    if extra_args:
        raise UsageError(f"unexpected arguments: {' '.join(extra_args)} (script arguments go after --run SCRIPT --)")
    if models:
        from graphtool.capture.script import split_target

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

    def pick(flag, attr):
        return flag if flag is not None else (getattr(entry, attr) if entry else None)

    return Budget(
        max_graph_breaks=pick(override.max_graph_breaks, "max_graph_breaks"),
        max_recompiles=pick(override.max_recompiles, "max_recompiles"),
        max_skipped_frames=pick(override.max_skipped_frames, "max_skipped_frames"),
        allowed_breaks=tuple(entry.allowed_breaks) if entry else (),
    )


def _run(targets, parallel: int, limit: Optional[float], debug: bool, progress: Progress) -> list:
    from graphtool.capture import compat
    from graphtool.capture.lint_job import run_lint_jobs

    compat.check_installed_torch()  # torch runs only in the children: check (and warn) once, here
    done = 0

    def finished(index, result) -> None:
        nonlocal done
        done += 1
        progress.advance(done, len(targets), "linting")

    return run_lint_jobs([t.job(debug) for t in targets], parallel=parallel, timeout=limit, on_done=finished)
