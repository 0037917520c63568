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
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Optional

from graphtool.commands import baseline as baselines
from graphtool.commands.launch import launch_of
from graphtool.commands.progress import SILENT, Progress
from graphtool.commands.result import Result
from graphtool.display_paths import display_path
from graphtool.errors import EXIT_USAGE, UsageError
from graphtool.schema import stamped


@dataclass(frozen=True, repr=False)
class LintOutcome(Result):
    """The lint report, and what ``--update-baseline`` did with the baseline file."""

    command = "lint"

    report: object  # LintReport
    baseline_written: Optional[Path] = None  # where --update-baseline wrote, when it did
    baseline_refused: Optional[str] = None  # why --update-baseline did not write, when it did not

    def exit_code(self) -> int:
        if self.baseline_refused is not None:
            return EXIT_USAGE
        if self.baseline_written is not None:
            return 2 if self.report.errored else 0
        return self.report.exit_code()

    def to_dict(self) -> dict:
        return stamped(self.command, self.report.to_dict())

    def summary(self) -> str:
        """``lint passed: 0 graph breaks, 0 recompiles, 0 skipped frames``, the counts of every model linted."""
        from graphtool.text import count

        models = self.report.models
        parts = [count(sum(len(m.counted_breaks) for m in models), "graph break"),
                 count(sum(len(m.recompiles) for m in models), "recompile"),
                 count(sum(len(m.skipped_frames) for m in models), "skipped frame")]
        return f"lint {'passed' if self.report.passed else 'failed'}: " + ", ".join(parts)

    def verdict(self) -> Optional[str]:
        """The terminal view's last line when it is not the report's own: what ``--update-baseline`` wrote."""
        if self.baseline_written is None:
            return None
        from graphtool.text import count

        n = sum(len(m.breaks) for m in self.report.models)
        return (f"baseline updated: wrote {count(n, 'graph break')} of {count(len(self.report.models), 'model')} "
                f"to {display_path(str(self.baseline_written))}")

    def view(self):
        from graphtool.render.lint import lint_view

        return lint_view(self.report, self.verdict())

    def diagnostics(self) -> str:
        from graphtool.render.diagnostics import format_diagnostics
        from graphtool.render.lint import lint_diagnostics

        return format_diagnostics(lint_diagnostics(self.report))

    @property
    def title(self) -> str:
        models = self.report.models
        return (models[0].target.entry or display_path(models[0].target.name)) if len(models) == 1 else "lint"

    @property
    def found(self) -> bool:
        """A model over its budget, with new breaks, or not linted."""
        return not self.report.passed

    @property
    def graph_breaks(self) -> list:
        """The breaks the budgets count (``Break``: ``file``, ``line``, ``reason``, ``new``)."""
        return [b for m in self.report.models for b in m.counted_breaks]


def lint(models: Optional[Sequence[str]] = None, *, run: Optional[str] = None, script_args: Sequence[str] = (),
         max_graph_breaks: Optional[int] = None, max_recompiles: Optional[int] = None,
         max_skipped_frames: Optional[int] = None, dynamic: bool = False,
         config: Optional[Path] = None, baseline: Optional[Path] = None, update_baseline: bool = False, strict: bool = False,
         jobs: Optional[int] = None, timeout: Optional[float] = None, debug: bool = False,
         progress: Progress = SILENT, ddp: Optional[dict] = None, fsdp2: Optional[dict] = None,
         schedule: bool = False, max_peak_memory: Optional[str] = None, min_coverage: Optional[float] = None,
         coverage: bool = False, log: Optional[Sequence[str]] = None, max_compile_seconds: Optional[float] = None) -> LintOutcome:
    """Lint every target; judge each against its budget and the baseline. ``max_peak_memory`` (a size or GPU name,
    as ``memory --fit`` takes it): each model's training step, predicted by ``graphtool memory --fit`` in a child
    of its own, must fit it. ``schedule``: after the example inputs,
    each model runs every step its script's ``get_input_schedule()`` yields, so recompiles are the loop's own, and
    a frame that hits ``recompile_limit`` fails whatever the budget. ``coverage`` measures each model's capture
    coverage (:mod:`graphtool.capture.coverage`); ``min_coverage`` (a share, 0.9) fails a model whose torch calls
    run inside compiled graphs less often. ``max_compile_seconds``: each model's cold compile, measured by ``graphtool
    compile`` in fresh children after its lint child (one model at a time), must take no longer. ``log`` (a TORCH_TRACE
    folder or files): judge a real run's breaks and
    recompiles instead of running anything (``graphtool lint --log DIR``): one target, named by the first path, its
    baseline entries under that name.

    With ``update_baseline`` the baseline is written only when every model was linted: a model that
    could not be (an error, a crash, a timeout) leaves the old file exactly as it was."""
    from graphtool.analysis.lint import LintReport
    from graphtool.config import find_config, load_config

    override = budget(max_graph_breaks=max_graph_breaks, max_recompiles=max_recompiles, max_skipped_frames=max_skipped_frames,
                      max_peak_memory=max_peak_memory, min_coverage=min_coverage, max_compile_seconds=max_compile_seconds)
    check_numbers(jobs=jobs, timeout=timeout)
    cfg_path = config or (find_config() if not models and not run else None)
    cfg = load_config(cfg_path) if cfg_path else None
    launch = launch_of(ddp, fsdp2)
    if log:
        if models or run or schedule or dynamic or max_peak_memory or coverage or min_coverage is not None or launch.wrapped \
                or max_compile_seconds is not None:
            raise UsageError("--log judges a run's logs: MODEL, --run, --schedule, --dynamic, --max-peak-memory, --coverage, "
                             "--min-coverage, --max-compile-seconds, --ddp and --fsdp2 are for runs lint makes itself")
        from graphtool.analysis.lint import LintTarget

        targets = [LintTarget(path=str(log[0]), budget=override)]
    else:
        targets = _targets(models, run, script_args, cfg, override, dynamic)
        if coverage:
            targets = [replace(t, coverage=True) for t in targets]
    _check_peak_budgets(targets, run)
    if schedule:
        if run:
            raise UsageError("--schedule lints a model script's get_input_schedule(); a script run with --run runs its own loop")
        targets = [replace(t, schedule=True) for t in targets]
    # under --ddp or --fsdp2 each model runs in its child's fake process group, as the launch would wrap it
    launch.check("lint", run=bool(run))
    targets = [launch.lint_target(t) for t in targets]
    baseline_path = baseline or (cfg.baseline if cfg else None)
    if update_baseline and baseline_path is None:
        raise UsageError("--update-baseline needs --baseline FILE (or 'baseline' in the config)")
    base = baselines.read(Path(baseline_path)) if baseline_path is not None and not update_baseline else None
    parallel = jobs or (cfg.jobs if cfg and cfg.jobs else 1)
    limit = timeout or (cfg.timeout if cfg else None)
    results = _run(targets, parallel, limit, debug, progress) if not log else [_from_log(log, progress)]
    judged = [baselines.judge(t, r, base, strict=strict) for t, r in zip(targets, results)]
    judged = _compile_times(_peak_memories(judged, parallel, limit, progress), limit, debug, progress)
    report = LintReport(tuple(judged), display_path(str(baseline_path)) if baseline_path else None)
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


def _from_log(paths: Sequence[str], progress: Progress):
    """What a run's logs say, as the result a lint child gives (torch is not imported)."""
    from graphtool.analysis.run_log import read_logs
    from graphtool.analysis.run_log.lint import as_lint_result

    progress.phase("reading the logs...")
    return as_lint_result(read_logs(paths))


def _check_peak_budgets(targets, run) -> None:
    """Each ``max_peak_memory`` is a size or GPU name ``memory --fit`` knows, before anything runs."""
    if run and targets[0].budget.max_compile_seconds is not None:
        raise UsageError("--max-compile-seconds compiles a model script (graphtool compile); a script run with --run is none")
    for t in targets:
        if t.budget.max_peak_memory is None:
            continue
        if run:
            raise UsageError("--max-peak-memory predicts a model script's training step; a script run with --run has none")
        _check_peak_budget(t.budget.max_peak_memory)


def _check_peak_budget(size: str) -> None:
    """``size`` is a size or GPU name ``memory --fit`` knows; the error names ``max_peak_memory``."""
    from graphtool.commands.fit import check_fit

    try:
        check_fit(size, None)
    except UsageError as exc:
        raise UsageError(exc.message.replace("--fit", "max_peak_memory"), hint=exc.hint) from None


#: the child that predicts one model's step peak (named, not imported: it runs the memory command, another command)
PEAK_WORKER = "graphtool.commands.peak_worker"


def _peak_memories(judged: list, parallel: int, limit: Optional[float], progress: Progress) -> list:
    """Each model judged against its ``max_peak_memory`` too: ``graphtool memory --fit`` for it in a child of its own
    (:mod:`graphtool.commands.peak_worker`, through lint's child machinery: ``--jobs`` at a time, ``--timeout``
    each, nothing left running), its ``fit`` read back."""
    from graphtool.analysis.lint import with_peak_memory
    from graphtool.capture.processes.children import run_jobs

    asked = [i for i, m in enumerate(judged) if m.target.budget.max_peak_memory is not None and m.status != "error"]
    if not asked:
        return judged
    progress.phase(f"predicting the training step's peak of {len(asked)} model{'s' if len(asked) != 1 else ''}...")
    jobs = [{"path": judged[i].target.path, "entry": judged[i].target.entry, "fit": judged[i].target.budget.max_peak_memory}
            for i in asked]
    out = list(judged)
    for i, raw in zip(asked, run_jobs(jobs, worker=PEAK_WORKER, parallel=parallel, timeout=limit)):
        out[i] = with_peak_memory(judged[i], raw.get("fit"), None if raw.get("ok") else raw.get("error") or "no result")
    return out


def _compile_times(judged: list, limit: Optional[float], debug: bool, progress: Progress) -> list:
    """Each model judged against its ``max_compile_seconds`` too: ``graphtool compile`` asked of a Session on it (its
    fresh children, ``--timeout`` each model), one model at a time, so that no two compiles share the CPU they time."""
    from graphtool.analysis.lint import with_compile_time
    from graphtool.commands.session import Session
    from graphtool.errors import GraphtoolError

    out = list(judged)
    for i, m in enumerate(judged):
        if m.target.budget.max_compile_seconds is not None and m.status != "error":
            progress.phase(f"compiling {display_path(m.target.path)} for real (max_compile_seconds)...")
            try:
                with Session(m.target.path, entry=m.target.entry, timeout=limit, debug=debug, progress=progress) as s:
                    out[i] = with_compile_time(m, s.compile().report)
            except GraphtoolError as exc:
                out[i] = with_compile_time(m, error=exc.message)
    return out


def run(session, *, steps: Optional[Sequence], allowed_breaks: Sequence[str], dynamic: bool, baseline,
        name: Optional[str], coverage: bool = False, **budgets) -> LintOutcome:
    """Lint the session's model in this process, as ``graphtool lint`` lints a script in its child: run once on its
    inputs, or once per entry of ``steps`` (each a tuple of positional arguments); judged against the ``budgets``
    (:func:`budget`) and ``baseline`` (a file or its content: :func:`graphtool.commands.baseline.accepted`), whose
    entries for ``name`` (default: the model's source file) are accepted. ``max_peak_memory``: the session's
    ``memory(fit=...)`` must fit; ``min_coverage`` (or ``coverage``): its capture coverage measured here;
    ``max_compile_seconds``: the session's ``compile()`` (a script's fresh processes) must not take longer."""
    from graphtool.analysis.lint import LintReport, LintTarget, with_compile_time, with_peak_memory
    from graphtool.capture.processes.lint_worker import lint_spec

    session.launch.check("lint", alone=True)
    limits = budget(**budgets, allowed_breaks=tuple(allowed_breaks))
    if limits.max_compile_seconds is not None and session.is_object:
        raise UsageError("max_compile_seconds compiles a model script in fresh processes (graphtool compile); "
                         "a model object has none: lint its script, or time it with graphtool.load(path).compile()")
    if limits.max_peak_memory is not None:
        _check_peak_budget(limits.max_peak_memory)
    base = baselines.accepted(baseline)
    spec = session.spec()
    calls = None if steps is None else [tuple(s) if isinstance(s, (tuple, list)) else (s,) for s in steps]
    result = lint_spec(spec, calls=calls, dynamic=dynamic, debug=session.debug,
                       coverage=coverage or limits.min_coverage is not None)
    target = LintTarget(path=name or str(spec.path), entry=None if name else spec.entry, dynamic=dynamic, budget=limits)
    judged = baselines.judge(target, result, base)
    if limits.max_peak_memory is not None and judged.status != "error":
        judged = with_peak_memory(judged, session.memory(fit=limits.max_peak_memory).fit.to_dict())
    if limits.max_compile_seconds is not None and judged.status != "error":
        judged = with_compile_time(judged, session.compile().report)
    return LintOutcome(LintReport((judged,), None))


def budget(**given):
    """The lint budgets ``given`` as a :class:`~graphtool.analysis.lint.Budget`, checked before anything runs: counts
    0 or more, seconds above 0, ``min_coverage`` a share (the gate and a Session's lint alike)."""
    from graphtool.analysis.coverage import check_min_coverage
    from graphtool.analysis.lint import Budget

    check_min_coverage(given.get("min_coverage"))
    check_numbers(**{k: v for k, v in given.items() if k.startswith("max_") and k != "max_peak_memory"})
    return Budget(**given)


def check_numbers(**values) -> None:
    """Budgets are counts (0 or more), ``jobs`` at least 1, ``timeout`` seconds above 0."""
    for name, value in values.items():
        if value is None:
            continue
        flag = "--" + name.replace("_", "-")
        if name in ("timeout", "max_compile_seconds"):
            from graphtool.capture.user.deadline import check_timeout

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
        from graphtool.capture.user.script import split_target

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
    """A model's budget: each flag given, else its config entry's (``BUDGET_KEYS``)."""
    from graphtool.config import BUDGET_KEYS

    picked = {k: getattr(override, k) if getattr(override, k) is not None else getattr(entry, k, None) for k in BUDGET_KEYS}
    return replace(override, **picked, allowed_breaks=tuple(entry.allowed_breaks) if entry else ())


def _run(targets, parallel: int, limit: Optional[float], debug: bool, progress: Progress) -> list:
    from graphtool.capture import compat
    from graphtool.capture.processes.lint_job import run_lint_jobs

    compat.check_installed_torch()  # torch runs only in the children: check (and warn) once, here
    done = 0

    def finished(index, result) -> None:
        nonlocal done
        done += 1
        progress.advance(done, len(targets), "linting")

    return run_lint_jobs([t.job(debug) for t in targets], parallel=parallel, timeout=limit, on_done=finished)
