"""Judge lint results against budgets, allowed break reasons and a baseline.

Pure functions over plain values: each child process gives a :class:`LintResult`
(``graphtool.capture.processes.lint_job``), this turns it into a :class:`ModelLint` and decides ``passed``.

A baseline entry matches a break by file (relative to the baseline file's folder, so the same
baseline works from any current folder; version-1 baselines, relative to the current folder, are
still read as such), reason kind (torch's ``gbNNNN`` id, else the
reason text) and the stripped text of the source line, so a break that only moved lines is not new;
a break torch saw in library code also matches by that library place (``transformers/...:78``).

A model that compiled no graph at all is a finding: with a budget on breaks or skipped frames it
fails with "torch.compile captured no graph: <cause>".

Example::

    >>> from graphtool.capture.processes.lint_job import BreakRecord
    >>> b = BreakRecord("print", None, "m.py", 3, "print(x)", None, 1)
    >>> judge(LintTarget("m.py"), LintResult(ok=True, graph_count=2, breaks=(b,)), Budget(max_graph_breaks=0)).passed
    False
    >>> judge(LintTarget("m.py"), LintResult(ok=True, no_graph="TORCHDYNAMO_DISABLE=1 is set"), Budget(max_graph_breaks=0)).failures
    ('torch.compile captured no graph: TORCHDYNAMO_DISABLE=1 is set',)
"""

from __future__ import annotations

import os
import re
from dataclasses import asdict, dataclass, field, replace
from pathlib import PurePosixPath

from graphtool.analysis.coverage import coverage_of
from graphtool.analysis.trace_report import BreakInfo
from graphtool.capture.processes.lint_job import LintJob, LintResult
from graphtool.display_paths import display_path as _rel
from graphtool.text import count

BASELINE_VERSION = 2  # paths relative to the baseline file's folder (version 1: to the current folder)
READABLE_BASELINE_VERSIONS = (1, 2)


@dataclass(frozen=True)
class Budget:
    max_graph_breaks: int | None = None
    max_recompiles: int | None = None
    allowed_breaks: tuple[str, ...] = ()  # regexes matched against the reason
    max_skipped_frames: int | None = None  # frames dynamo gave up on and ran eagerly
    max_peak_memory: str | None = None  # a size or GPU name the training step's predicted peak must fit
    min_coverage: float | None = None  # the share of torch calls that must run inside compiled graphs (analysis.coverage)
    max_compile_seconds: float | None = None  # the cold compile's seconds (analysis.compile_time, graphtool compile)


def no_graph_finding(cause: str) -> str:
    """The finding (and budget failure) for a model that compiled no graph."""
    return f"torch.compile captured no graph: {cause}"


def library_place(file: str | None, line: int | None) -> str | None:
    """A library file's place independent of where it is installed: the path under site-packages.

    >>> library_place("/venv/lib/python3.11/site-packages/transformers/utils/generic.py", 937)
    'transformers/utils/generic.py:937'
    """
    if not file:
        return None
    norm = file.replace("\\", "/")
    for marker in ("/site-packages/", "/dist-packages/"):
        if marker in norm:
            norm = norm.rsplit(marker, 1)[1]
            break
    else:
        norm = _rel(norm) or norm
        if "/torch/" in norm:  # a torch checkout: from the package down
            norm = "torch/" + norm.rsplit("/torch/", 1)[1]
    return f"{PurePosixPath(norm)}:{line}"


@dataclass(frozen=True)
class LintTarget:
    """What to lint: a model (``path``, ``entry``) or a script (``run`` with ``args``)."""

    path: str
    entry: str | None = None
    run: bool = False
    args: tuple[str, ...] = ()
    dynamic: bool = False
    budget: Budget = field(default_factory=Budget)
    ddp: tuple[int, float] | None = None  # ``--ddp``: (world_size, bucket_cap_mb)
    fsdp2: int | None = None  # ``--fsdp2``: the world size
    schedule: bool = False  # ``--schedule``: also run each step of the script's get_input_schedule()
    coverage: bool = False  # ``--coverage``: also measure capture coverage (so does a min_coverage budget)

    @property
    def name(self) -> str:
        return f"{self.path}:{self.entry}" if self.entry else self.path

    def job(self, debug: bool = False) -> LintJob:
        if self.run:
            return LintJob(path=self.path, run=True, args=self.args, debug=debug)
        return LintJob(path=self.path, entry=self.entry, dynamic=self.dynamic, debug=debug, ddp=self.ddp, fsdp2=self.fsdp2,
                       schedule=self.schedule, coverage=self.coverage or self.budget.min_coverage is not None)


@dataclass(frozen=True)
class Break(BreakInfo):
    """A graph break as lint judges it: the one record (:class:`~graphtool.capture.graph_breaks.BreakRecord`,
    placed as trace places it, with trace's help) and whether the baseline knew it and a config allowed it."""

    new: bool | None = None  # None without a baseline
    allowed: bool = False

    @property
    def kind(self) -> str:
        return self.code or self.reason

    @property
    def library(self) -> str | None:
        return library_place(self.library_file, self.library_line)

    def key(self) -> tuple:
        # the library place keeps apart breaks that one user call led to
        return (_rel(self.file), self.kind, self.source_text or (str(self.line) if self.line else None), self.library)

    def to_dict(self) -> dict:
        return {
            "reason": self.reason, "code": self.code, "file": self.file, "line": self.line,
            "source_text": self.source_text, "hint": self.hint, "help": self.help, "occurrences": self.occurrences,
            "new": self.new, "allowed": self.allowed, "library_file": self.library_file, "library_line": self.library_line,
        }


@dataclass(frozen=True)
class ModelLint:
    target: LintTarget
    status: str  # ok | over_budget | error
    error: str | None
    error_detail: str | None
    graph_count: int
    breaks: tuple[Break, ...]
    recompiles: tuple[dict, ...]
    skipped_frames: tuple[dict, ...]
    failures: tuple[str, ...]  # why it is over budget
    fixed: tuple[dict, ...]  # baseline breaks no longer present
    seconds: float
    no_graph: str | None = None  # why torch.compile captured no graph, when it captured none
    schedule: dict | None = None  # ``--schedule``: steps run after the example inputs, their source, what was left out
    limit_hit: str | None = None  # dynamo's words when a frame hit recompile_limit and ran eagerly from then on
    peak_memory: dict | None = None  # max_peak_memory: the predicted step peak, the budget, graphtool memory's verdict
    counters: dict | None = None  # dynamo's counters for the example inputs' call (calls_captured, fallbacks_to_eager)
    coverage: dict | None = None  # --coverage: analysis.coverage.Coverage.to_dict()
    compile_time: dict | None = None  # max_compile_seconds: the cold compile's seconds, the budget, whether it fits

    @property
    def passed(self) -> bool:
        return self.status == "ok"

    @property
    def no_graph_finding(self) -> str | None:
        return no_graph_finding(self.no_graph) if self.no_graph else None

    @property
    def counted_breaks(self) -> list[Break]:
        return [b for b in self.breaks if not b.allowed]

    def ungated(self) -> tuple[tuple[str, int], ...]:
        """``(kind, n)`` for each kind of finding that no budget (nor, for breaks, a baseline) judged:
        found, shown, and passed whatever the count."""
        b = self.target.budget
        baselined = any(x.new is not None for x in self.breaks)
        found = (("graph break", len(self.counted_breaks), b.max_graph_breaks is not None or baselined),
                 ("recompile", len(self.recompiles), b.max_recompiles is not None),
                 ("skipped frame", len(self.skipped_frames), b.max_skipped_frames is not None))
        return tuple((kind, n) for kind, n, gated in found if n and not gated)

    def to_dict(self) -> dict:
        t = self.target
        return {
            "path": t.path,
            "entry": t.entry,
            "mode": "script" if t.run else "model",
            "status": self.status,
            "passed": self.passed,
            "error": self.error,
            "graph_count": self.graph_count,
            "graph_break_count": len(self.counted_breaks),
            "recompile_count": len(self.recompiles),
            "skipped_frame_count": len(self.skipped_frames),
            "no_graph": self.no_graph,
            "breaks": [b.to_dict() for b in self.breaks],
            "recompiles": list(self.recompiles),
            "skipped_frames": list(self.skipped_frames),
            "budget": {
                "max_graph_breaks": t.budget.max_graph_breaks,
                "max_recompiles": t.budget.max_recompiles,
                "max_skipped_frames": t.budget.max_skipped_frames,
                "max_peak_memory": t.budget.max_peak_memory,
                "min_coverage": t.budget.min_coverage,
                "max_compile_seconds": t.budget.max_compile_seconds,
                "allowed_breaks": list(t.budget.allowed_breaks),
            },
            "failures": list(self.failures),
            "fixed_breaks": list(self.fixed),
            "schedule": self.schedule,
            "recompile_limit_hit": self.limit_hit,
            "peak_memory": self.peak_memory,
            "calls_captured": (self.counters or {}).get("calls_captured"),
            "fallbacks_to_eager": (self.counters or {}).get("fallbacks_to_eager"),
            "coverage": self.coverage,
            "compile_time": self.compile_time,
            "seconds": self.seconds,
        }


@dataclass(frozen=True)
class LintReport:
    models: tuple[ModelLint, ...]
    baseline: str | None

    @property
    def errored(self) -> bool:
        return any(m.status == "error" for m in self.models)

    @property
    def passed(self) -> bool:
        return all(m.passed for m in self.models)

    def exit_code(self) -> int:
        """0 within budget; 1 over budget or new breaks; 2 a model could not be linted."""
        return 2 if self.errored else 0 if self.passed else 1

    def ungated(self) -> tuple[str, ...]:
        """What was found but judged by nothing, with the option that would judge it: a run with no
        budget passes whatever it finds, and its verdict must not read as "no breaks".

        >>> from graphtool.capture.processes.lint_job import BreakRecord
        >>> b = BreakRecord("print", None, "m.py", 3, "print(x)", None, 1)
        >>> LintReport((judge(LintTarget("m.py"), LintResult(ok=True, graph_count=2, breaks=(b,))),), None).ungated()
        ('1 graph break; no budget set: --max-graph-breaks N or a baseline gates it',)
        """
        totals: dict[str, int] = {}
        for m in self.models:
            for kind, n in m.ungated():
                totals[kind] = totals.get(kind, 0) + n
        return tuple(f"{count(n, kind)}; no budget set: {_GATES[kind]} gates {'it' if n == 1 else 'them'}"
                     for kind, n in totals.items())

    def to_dict(self) -> dict:
        from graphtool import __version__

        return {
            "schema_version": 1,
            "graphtool_version": __version__,
            "passed": self.passed,
            "baseline": self.baseline,
            "models": [m.to_dict() for m in self.models],
        }


_GATES = {"graph break": "--max-graph-breaks N or a baseline", "recompile": "--max-recompiles N",
          "skipped frame": "--max-skipped-frames N"}


def judge(target: LintTarget, result: LintResult, budget: Budget | None = None, baseline: dict | None = None,
          strict: bool = False) -> ModelLint:
    """Turn one child-process result into a judged :class:`ModelLint`.

    With a baseline (as pytorch's check_graph_breaks.py ratchets), ``max_graph_breaks`` counts only
    breaks that are not in it: the baselined ones are known and accepted. Baselined breaks that no
    longer occur are reported as fixed; ``strict`` fails on them too, so the baseline stays tight."""
    budget = budget or target.budget
    if not result.ok:
        return ModelLint(target, "error", result.error or "unknown error", result.detail, 0, (), (), (), (), (), result.seconds)
    patterns = [re.compile(p) for p in budget.allowed_breaks]
    known = _baseline_keys(baseline, target) if baseline is not None else None
    root = baseline_root(baseline) if baseline is not None else ""
    breaks = []
    for d in result.breaks:
        b = Break.of(d, allowed=any(p.search(d.reason) for p in patterns))
        if known is not None:
            b = replace(b, new=_break_key(b, root) not in known)
        breaks.append(b)
    counted = [b for b in breaks if not b.allowed]
    recompiles = tuple(asdict(f) for f in result.recompiles)
    skipped = tuple(asdict(f) for f in result.skipped_frames)
    new = [b for b in counted if b.new]
    budgeted = new if known is not None else counted  # with a baseline, the budget is on new breaks
    failures = _budget_failures(budget, result.no_graph, len(budgeted), len(recompiles), len(skipped),
                                what="new graph break" if known is not None else "graph break")
    if new and budget.max_graph_breaks is None:  # a baseline alone: any new break fails; a budget says how many may
        failures.append(f"{count(len(new), 'new graph break')} not in the baseline")
    if result.limit_hit:  # the worst silent case: no budget lets it pass
        failures.append(f"recompile limit hit ({result.limit_hit}): the frame runs eagerly, uncompiled, from then on")
    coverage = coverage_of(result.coverage)
    if budget.min_coverage is not None:
        below = coverage.below(budget.min_coverage) if coverage is not None else \
            "op coverage not measured (a --run script, --ddp or --fsdp2 run): --min-coverage cannot judge it"
        if below:
            failures.append(below)
    fixed = ()
    if known is not None:
        now = {_break_key(b, root) for b in breaks}
        fixed = tuple(e for e in _baseline_entries(baseline, target) if _entry_key(e, root) not in now)
        if strict and fixed:
            failures.append(f"{count(len(fixed), 'baselined graph break')} no longer "
                            f"{'occurs' if len(fixed) == 1 else 'occur'} (--strict): update the baseline")
    return ModelLint(
        target=target,
        # an error beside findings: the --dynamic run failed after the example inputs' run, whose findings stand
        status="error" if result.error else "over_budget" if failures else "ok",
        error=result.error,
        error_detail=result.detail,
        graph_count=result.graph_count,
        breaks=tuple(breaks),
        recompiles=recompiles,
        skipped_frames=skipped,
        failures=tuple(failures),
        fixed=fixed,
        seconds=result.seconds,
        no_graph=result.no_graph,
        schedule=result.schedule,
        limit_hit=result.limit_hit,
        counters=result.counters,
        coverage=coverage.to_dict() if coverage is not None else None,
    )


def with_peak_memory(model: ModelLint, fit: dict | None, error: str | None = None) -> ModelLint:
    """``model`` judged against its ``max_peak_memory`` too: ``fit`` is ``graphtool memory --fit``'s document's
    ``fit`` for the same model (or ``error``, why it could not be had). A step predicted over the budget fails.

    >>> m = ModelLint(LintTarget("m.py", budget=Budget(max_peak_memory="1KiB")), "ok", None, None, 1, (), (), (), (), (), 1.0)
    >>> fit = {"verdict": "does not fit 1.0 KiB: over by 24.8 KiB (predicted step peak 25.8 KiB)",
    ...        "compiled": {"peak": 26408}, "target": {"text": "1KiB", "bytes": 1024}}
    >>> j = with_peak_memory(m, fit)
    >>> j.status, j.failures
    ('over_budget', ('predicted step peak 25.8 KiB, budget 1KiB (max_peak_memory): does not fit 1.0 KiB: over by 24.8 KiB',))
    """
    budget = model.target.budget.max_peak_memory
    if budget is None or model.status == "error":
        return model
    if error is not None:
        return replace(model, status="error", error=f"max_peak_memory {budget}: the step's peak could not be predicted: {error}")
    from graphtool.analysis.memory.saved import format_bytes

    peak = fit["compiled"]["peak"]
    verdict = fit["verdict"].split(" (predicted")[0]
    said = {"predicted_peak": peak, "budget": budget, "budget_bytes": fit["target"]["bytes"], "verdict": fit["verdict"]}
    if peak <= fit["target"]["bytes"]:
        return replace(model, peak_memory=said)
    failure = f"predicted step peak {format_bytes(peak)}, budget {budget} (max_peak_memory): {verdict}"
    return replace(model, peak_memory=said, status="over_budget", failures=(*model.failures, failure))


def with_compile_time(model: ModelLint, compiled=None, error: str | None = None) -> ModelLint:
    """``model`` judged against its ``max_compile_seconds`` too: ``compiled`` is ``graphtool compile``'s
    :class:`~graphtool.analysis.compile_time.CompileReport` for the same model (or ``error``, why it could not be had).
    A cold compile over the budget, or one that did not finish, fails.

    >>> from graphtool.analysis.compile_time import CompileReport, CompileRun
    >>> m = ModelLint(LintTarget("m.py", budget=Budget(max_compile_seconds=60)), "ok", None, None, 1, (), (), (), (), (), 1.0)
    >>> r = CompileReport("m.py", None, "0", "2.13", "cpu", "inductor", None, True, "off", CompileRun("whole", 70.1, 0.5))
    >>> j = with_compile_time(m, r)
    >>> j.status, j.failures, j.compile_time["seconds"]
    ('over_budget', ('compile took 69.6 s, budget 60 s: over by 9.6 s (max_compile_seconds)',), 69.6)
    """
    budget = model.target.budget.max_compile_seconds
    if budget is None or model.status == "error":
        return model
    if error is not None:
        return replace(model, status="error", error=f"max_compile_seconds {budget:g}: the compile could not be measured: {error}")
    from graphtool.analysis.compile_time import judge_compile_budget

    judged = judge_compile_budget(compiled, budget)
    if judged.ok:
        return replace(model, compile_time=judged.to_dict())
    return replace(model, compile_time=judged.to_dict(), status="over_budget",
                   failures=(*model.failures, f"{judged.text} (max_compile_seconds)"))


def _budget_failures(budget: Budget, no_graph: str | None, breaks: int, recompiles: int, skipped: int,
                     what: str = "graph break") -> list[str]:
    """Why the counts are over budget. No graph at all fails any budget on breaks or skipped frames:
    a model torch runs eagerly has no break to count, and 0 is not within budget."""
    failures = []
    if no_graph and (budget.max_graph_breaks is not None or budget.max_skipped_frames is not None):
        failures.append(no_graph_finding(no_graph))
    if budget.max_graph_breaks is not None and breaks > budget.max_graph_breaks:
        failures.append(f"{count(breaks, what)}, budget {budget.max_graph_breaks}")
    if budget.max_recompiles is not None and recompiles > budget.max_recompiles:
        failures.append(f"{count(recompiles, 'recompile')}, budget {budget.max_recompiles}")
    if budget.max_skipped_frames is not None and skipped > budget.max_skipped_frames:
        failures.append(f"{count(skipped, 'skipped frame')}, budget {budget.max_skipped_frames}")
    return failures


def _resolved(path: str | None, root: str) -> str | None:
    """A baseline's (or a break's) file path, absolute and with symlinks resolved, for matching:
    relative paths are taken from ``root``. Names that are not paths (``<string>``) stay."""
    if not path or path.startswith("<"):
        return path
    return os.path.realpath(os.path.join(root, path))


def _relative(path: str | None, root: str) -> str | None:
    """``path`` as a baseline stores it: relative to the baseline's folder, with ``/``."""
    if not path or path.startswith("<"):
        return path
    try:
        rel = os.path.relpath(os.path.realpath(path), root)
    except ValueError:  # another drive on Windows
        return path
    return rel.replace(os.sep, "/")


def baseline_root(baseline: dict) -> str:
    """The folder a baseline's paths are relative to: the baseline file's own folder (version 2),
    the folder lint ran from (version 1, whose paths were relative to it)."""
    return baseline.get("root") or os.getcwd()


def _break_key(b: Break, root: str) -> tuple:
    _, kind, text, library = b.key()
    return (_resolved(b.file, root), kind, text, library)


def _entry_key(e: dict, root: str) -> tuple:
    return (_resolved(e.get("file"), root), e.get("kind"),
            e.get("source_text") or (str(e["line"]) if e.get("line") else None), e.get("library"))


def _baseline_entries(baseline: dict, target: LintTarget) -> list[dict]:
    root = baseline_root(baseline)
    model = _resolved(target.path, os.getcwd())
    return [e for e in baseline.get("breaks", []) if _resolved(e.get("model"), root) == model]


def _baseline_keys(baseline: dict, target: LintTarget) -> set[tuple]:
    root = baseline_root(baseline)
    return {_entry_key(e, root) for e in _baseline_entries(baseline, target)}


def make_baseline(report: LintReport, root: str | os.PathLike | None = None) -> dict:
    """The baseline file's content: every current break of every linted model, each path relative to
    ``root`` (the baseline file's folder), so the baseline means the same from any current folder."""
    root = os.path.realpath(root if root is not None else os.getcwd())
    entries = []
    for m in report.models:
        for b in m.breaks:
            _, kind, _, library = b.key()
            entry = {
                "model": _relative(m.target.path, root), "file": _relative(b.file, root), "kind": kind,
                "source_text": b.source_text, "line": b.line, "reason": b.reason,
            }
            if library:  # only then: baselines of user-code breaks keep their shape
                entry["library"] = library
            entries.append(entry)
    return {"version": BASELINE_VERSION, "breaks": entries}


class BaselineError(ValueError):
    """A baseline file's content is not a baseline: ``index`` is the entry at fault, if one is."""

    def __init__(self, message: str, index: int | None = None, *, newer: bool = False):
        super().__init__(message)
        self.index = index
        self.newer = newer  # written by a newer graphtool: upgrading reads it, rewriting loses what it added


_ENTRY_TEXT_KEYS = ("model", "kind")  # needed to match anything
_ENTRY_OPTIONAL = {"file": str, "source_text": str, "reason": str, "library": str, "line": int}


def validate_baseline(data: object, path: str, root: str | os.PathLike | None = None) -> dict:
    """Check a parsed baseline file; returns it with ``root`` set (the folder its paths are relative to:
    the file's own folder from version 2 on; the current folder for version 1, which stored paths
    relative to wherever lint ran). Raises :class:`BaselineError`."""
    version = data.get("version") if isinstance(data, dict) else None
    if isinstance(version, int) and not isinstance(version, bool) and version > BASELINE_VERSION:
        raise BaselineError(f"written by a newer graphtool: baseline version {version}, this graphtool reads versions "
                            f"{', '.join(map(str, READABLE_BASELINE_VERSIONS))}", newer=True)
    if type(version) is not int or version not in READABLE_BASELINE_VERSIONS or not isinstance(data.get("breaks"), list):
        raise BaselineError(f"not a graphtool baseline (expected {{\"version\": {BASELINE_VERSION}, \"breaks\": [...]}})")
    for i, e in enumerate(data["breaks"]):
        if not isinstance(e, dict):
            raise BaselineError(f"breaks[{i}]: each entry must be an object, got {_json_type(e)}", i)
        for key in _ENTRY_TEXT_KEYS:
            if not isinstance(e.get(key), str):
                what = "missing" if key not in e else f"must be a string, got {_json_type(e[key])}"
                raise BaselineError(f"breaks[{i}]: {key!r} {what}", i)
        for key, want in _ENTRY_OPTIONAL.items():
            value = e.get(key)
            if value is not None and (not isinstance(value, want) or isinstance(value, bool)):
                raise BaselineError(f"breaks[{i}]: {key!r} must be a {_JSON_NAMES[want]} or null, got {_json_type(value)}", i)
    if data["version"] == 1:
        base = os.getcwd()
    else:
        base = os.path.dirname(os.path.abspath(path)) if root is None else os.fspath(root)
    return {**data, "root": os.path.realpath(base)}


_JSON_NAMES = {str: "string", int: "number", float: "number", bool: "boolean", list: "array", dict: "object", type(None): "null"}


def _json_type(value: object) -> str:
    return _JSON_NAMES.get(type(value), type(value).__name__)
