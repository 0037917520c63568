"""What crosses the process boundary in ``graphtool lint``: the job a child runs and the result it
writes back, as typed records with ``to_dict``/``from_dict``. This module owns the protocol and
starts the workers (:func:`run_lint_jobs`); nothing else names the worker module.

Example::

    >>> job = LintJob(path="m.py", dynamic=True)
    >>> LintJob.from_dict(job.to_dict()) == job
    True
    >>> LintResult.failed("timed out after 5 s").to_dict()["ok"]
    False
    >>> LintResult.from_dict(LintResult(ok=True, no_graph="TORCHDYNAMO_DISABLE=1").to_dict()).no_graph
    'TORCHDYNAMO_DISABLE=1'
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Optional

from graphtool.capture.graph_breaks import BreakRecord  # the one break record, as a child writes it back

#: the child-process entry point (``python -m WORKER JOB.json RESULT.json``)
WORKER = "graphtool.capture.processes.lint_worker"


@dataclass(frozen=True)
class LintJob:
    """A model (``path``, ``entry``) or, with ``run``, a script run unchanged with ``args``."""

    path: str
    entry: Optional[str] = None
    run: bool = False
    args: tuple[str, ...] = ()
    dynamic: bool = False
    debug: bool = False
    reset: bool = False  # forget compiled frames first (for in-process callers such as tests)
    # ``--ddp``: run the model as DDP(torch.compile(model)); (world_size, bucket_cap_mb), or None
    ddp: Optional[tuple[int, float]] = None
    # ``--fsdp2``: run the model under fully_shard as rank 0 of this many ranks (a fake process group), or None
    fsdp2: Optional[int] = None
    # ``--schedule``: after the example inputs, run each step the script's get_input_schedule() yields
    schedule: bool = False
    # ``--coverage``/``--min-coverage``: also measure capture coverage (graphtool.capture.coverage)
    coverage: bool = False

    def to_dict(self) -> dict:
        d = asdict(self)
        d["args"] = list(self.args)
        d["ddp"] = list(self.ddp) if self.ddp is not None else None
        return d

    @classmethod
    def from_dict(cls, d: dict) -> LintJob:
        return cls(path=d["path"], entry=d.get("entry"), run=bool(d.get("run")), args=tuple(d.get("args", ())),
                   dynamic=bool(d.get("dynamic")), debug=bool(d.get("debug")), reset=bool(d.get("reset")),
                   ddp=(int(d["ddp"][0]), float(d["ddp"][1])) if d.get("ddp") else None,
                   fsdp2=int(d["fsdp2"]) if d.get("fsdp2") else None, schedule=bool(d.get("schedule")),
                   coverage=bool(d.get("coverage")))


@dataclass(frozen=True)
class FrameRecord:
    """A frame dynamo recompiled or gave up on, at the user's own code: the frame's ``def`` when it
    is the user's, else the user's call that led into it (``library_*`` keep the frame's own place)."""

    function: Optional[str]
    file: Optional[str]
    line: Optional[int]
    reason: Optional[str]
    library_file: Optional[str] = None
    library_line: Optional[int] = None
    break_file: Optional[str] = None  # a skipped frame: where the break that made dynamo give up was
    break_line: Optional[int] = None


@dataclass(frozen=True)
class LintResult:
    """What one child found, or why it could not lint (``ok`` False, with ``exit_code``)."""

    ok: bool
    graph_count: int = 0
    breaks: tuple[BreakRecord, ...] = ()
    recompiles: tuple[FrameRecord, ...] = ()
    skipped_frames: tuple[FrameRecord, ...] = ()
    seconds: float = 0.0
    error: Optional[str] = None
    detail: Optional[str] = None
    exit_code: int = 0
    # why torch.compile captured no graph at all (``graph_count`` 0), as graphtool could see it
    no_graph: Optional[str] = None
    # ``--schedule``: the steps run after the example inputs, where they came from, and what was left out
    schedule: Optional[dict] = None
    # dynamo's own words when a frame hit ``recompile_limit`` and ran eagerly from then on
    limit_hit: Optional[str] = None
    # dynamo's counters for the example inputs' call (a --run script: the whole script): calls_captured,
    # fallbacks_to_eager, unique_graphs, ... (graphtool.capture.compat.counters_since)
    counters: Optional[dict] = None
    # ``--coverage``: graphtool.capture.coverage.CoverageCounts as a dict
    coverage: Optional[dict] = None

    @classmethod
    def failed(cls, error: str, detail: Optional[str] = None, exit_code: int = 2, seconds: float = 0.0) -> LintResult:
        return cls(ok=False, error=error, detail=detail, exit_code=exit_code, seconds=seconds)

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> LintResult:
        return cls(
            ok=bool(d.get("ok")),
            graph_count=int(d.get("graph_count", 0)),
            breaks=tuple(BreakRecord(**b) for b in d.get("breaks", ())),
            recompiles=tuple(FrameRecord(**f) for f in d.get("recompiles", ())),
            skipped_frames=tuple(FrameRecord(**f) for f in d.get("skipped_frames", ())),
            seconds=float(d.get("seconds", 0.0)),
            error=d.get("error"),
            detail=d.get("detail"),
            exit_code=int(d.get("exit_code", 0)),
            no_graph=d.get("no_graph"),
            schedule=d.get("schedule"),
            limit_hit=d.get("limit_hit"),
            counters=d.get("counters"),
            coverage=d.get("coverage"),
        )


def run_lint_jobs(jobs: list[LintJob], *, parallel: int = 1, timeout: float | None = None,
                  on_done: Callable[[int, LintResult], None] | None = None) -> list[LintResult]:
    """Run each job in its own child process, ``parallel`` at a time; results in the order asked."""
    from graphtool.capture.processes.children import run_jobs

    def done(index: int, raw: dict) -> None:
        if on_done:
            on_done(index, LintResult.from_dict(raw))

    raw = run_jobs([j.to_dict() for j in jobs], worker=WORKER, parallel=parallel, timeout=timeout, on_done=done)
    return [LintResult.from_dict(r) for r in raw]
