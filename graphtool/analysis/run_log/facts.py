"""What a real run's TORCH_TRACE logs say, as frozen dataclasses of plain values (``to_dict()`` is the JSON).

The names are the ones docs/json-report.md documents under ``graphtool log`` (schema:
``graphtool/schema/log.schema.json``).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from graphtool.analysis.compile_phases import PHASES


def _seconds(v: float | None) -> float | None:
    return None if v is None else round(v, 6)


def rank_label(rank: int | None) -> str:
    """``"rank 1"``, or ``"process"`` for a run without torch.distributed."""
    return "process" if rank is None else f"rank {rank}"


def ranks_text(ranks) -> str:
    """``[0, 1, 2, 5]`` -> ``"ranks 0-2, 5"``; ``[None]`` -> ``"the process"``.

    >>> ranks_text([0, 1, 2, 5]), ranks_text([3]), ranks_text([None])
    ('ranks 0-2, 5', 'rank 3', 'the process')
    """
    known = sorted(r for r in ranks if r is not None)
    if not known:
        return "the process"
    runs: list[list[int]] = []
    for r in known:
        if runs and r == runs[-1][-1] + 1:
            runs[-1].append(r)
        else:
            runs.append([r])
    parts = [f"{run[0]}-{run[-1]}" if len(run) > 2 else ", ".join(map(str, run)) for run in runs]
    return ("rank " if len(known) == 1 else "ranks ") + ", ".join(parts)


@dataclass(frozen=True)
class Compile:
    """One compile id of one process: a frame traced by dynamo, its graphs and its time."""

    rank: int | None
    compile_id: str  # torch's: "0/1" (frame 0, its second compile), "!0/0/1" under compiled autograd
    frame_id: int | None
    frame_compile_id: int | None
    attempts: int  # dynamo's tries (a graph break restarts the trace: attempt 1 compiles the graph up to it)
    function: str | None  # co_name
    file: str | None
    line: int | None  # co_firstlineno
    graphs: int  # graphs dynamo handed the backend and got back compiled
    ops: int | None  # ops in dynamo's graph (graph_op_count)
    outcome: str  # compiled | no graph | failed | recompile limit
    fail_type: str | None = None
    fail_reason: str | None = None
    recompile_reason: str | None = None
    seconds: float | None = None  # the frame's whole compile (forward and any backward compiled with it)
    backward_seconds: float | None = None  # a backward compiled lazily, at its first call
    phases: dict = field(default_factory=dict)  # seconds per phase (compile_phases.PHASES keys), forward
    backward_phases: dict = field(default_factory=dict)
    cache: dict = field(default_factory=dict)  # fx_graph_hits, fx_graph_misses, aot_autograd_hits, ...
    cudagraph_skip_reason: str | None = None
    signature: tuple[str, ...] = ()  # md5 of each graph dynamo logged: equal graphs, equal signatures

    @property
    def where(self) -> str:
        return f"{self.file}:{self.line}" if self.file else "?"

    def to_dict(self) -> dict:
        d = asdict(self)
        d["seconds"], d["backward_seconds"] = _seconds(self.seconds), _seconds(self.backward_seconds)
        d["signature"] = list(self.signature)
        return d


@dataclass(frozen=True)
class BreakSite:
    """Graph breaks deduplicated by where torch says they are (file, line) and torch's ``gb`` id."""

    file: str | None
    line: int | None
    gb_id: str | None
    reason: str
    count: int  # break records: every compile that traced through the site (a recompile traces it again)
    ranks: tuple  # ranks (None: a process without torch.distributed)
    frames: tuple[str, ...]  # the functions dynamo was compiling when it broke
    compile_ids: tuple[str, ...]  # "0/0", or "rank 1: 0/0" when several ranks
    hint: str | None = None
    skips_frame: bool = False  # dynamo gave up on the whole frame
    user_file: str | None = None  # for a break in library code: the user's call that led there
    user_line: int | None = None
    damaged: bool = False  # the record's payload failed its md5: where it broke is unknown

    def to_dict(self) -> dict:
        d = asdict(self)
        d["ranks"], d["frames"], d["compile_ids"] = list(self.ranks), list(self.frames), list(self.compile_ids)
        return d


@dataclass(frozen=True)
class Recompile:
    """A frame compiled again because a guard failed: torch's reasons (``recompile_reasons``)."""

    rank: int | None
    compile_id: str
    frame: str | None
    file: str | None
    line: int | None
    reason: str
    reasons: tuple[str, ...] = ()  # every guard failure torch listed (reason is the first)
    hit_limit: bool = False  # this compile was refused: the frame passed recompile_limit and runs eagerly

    def to_dict(self) -> dict:
        d = asdict(self)
        d["reasons"] = list(self.reasons)
        return d


@dataclass(frozen=True)
class SkippedFrame:
    """A frame dynamo gave up on (compiles nothing of it and runs it eagerly): a failed compile, or the recompile
    limit."""

    rank: int | None
    compile_id: str
    frame: str | None
    file: str | None
    line: int | None
    reason: str
    recompile_limit: bool = False

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class CudagraphSkip:
    rank: int | None
    compile_id: str
    frame: str | None
    graph: str  # forward | backward
    reason: str

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class FrameTime:
    """Compile time of one frame (function at file:line), over its compiles and ranks."""

    frame: str | None
    file: str | None
    line: int | None
    compiles: int
    seconds: float
    backward_seconds: float
    phases: dict

    def to_dict(self) -> dict:
        d = asdict(self)
        d["seconds"], d["backward_seconds"] = _seconds(self.seconds), _seconds(self.backward_seconds)
        return d


@dataclass(frozen=True)
class CompileTime:
    """Where compile time went, from torch's ``compilation_metrics`` (see :mod:`graphtool.analysis.compile_phases`)."""

    seconds: float  # every compile, forward and backward, every rank
    forward_seconds: float
    backward_seconds: float
    phases: dict  # seconds per phase, forward and backward together
    forward_phases: dict
    backward_phases: dict
    frames: tuple[FrameTime, ...]  # slowest first
    cache: dict  # hits and misses, summed
    runtime: dict  # run-time work torch timed (cudagraphify, autotune), never in ``seconds``
    timed: int  # compiles that carried compile-time metrics

    def to_dict(self) -> dict:
        return {"seconds": _seconds(self.seconds), "forward_seconds": _seconds(self.forward_seconds),
                "backward_seconds": _seconds(self.backward_seconds), "phases": self.phases,
                "forward_phases": self.forward_phases, "backward_phases": self.backward_phases,
                "phase_titles": {p.key: p.title for p in PHASES}, "frames": [f.to_dict() for f in self.frames],
                "cache": self.cache, "runtime": self.runtime, "timed": self.timed}


@dataclass(frozen=True)
class RankFacts:
    rank: int | None
    files: tuple[str, ...]
    graphs_compiled: int
    graph_breaks: int  # break records
    break_sites: int
    recompiles: int
    compile_seconds: float
    frames: int
    compile_ids: int
    calls_captured: int | None = None  # torch's counters["stats"]["calls_captured"], from the log (None: not to be had)
    fallbacks_to_eager: int | None = None  # counters["frames"] total minus ok

    def to_dict(self) -> dict:
        d = asdict(self)
        d["files"] = list(self.files)
        d["compile_seconds"] = _seconds(self.compile_seconds)
        return d


@dataclass(frozen=True)
class Desync:
    """Ranks that did not compile alike: what hangs a collective (one rank waits in a graph the other never runs)."""

    kind: str  # graphs | graph_breaks | recompiles
    message: str
    ranks: dict  # rank (as text) -> what that rank did

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class LogInfo:
    """What was read and what could not be: the damage counted and named."""

    files: tuple  # LogFile
    torch_version: str | None
    lines: int
    records: int
    unknown: tuple[dict, ...]  # {kind, key, count, file, line}: envelope keys and records this reader does not know
    bad_payloads: int
    bad_lines: int
    bad_payload_examples: tuple  # Damaged
    bad_line_examples: tuple

    @property
    def damaged(self) -> bool:
        return bool(self.bad_payloads or self.bad_lines or self.unknown)

    def to_dict(self) -> dict:
        return {"files": [f.to_dict() for f in self.files], "torch_version": self.torch_version, "lines": self.lines,
                "records": self.records, "unknown": list(self.unknown), "bad_payloads": self.bad_payloads,
                "bad_lines": self.bad_lines, "bad_payload_examples": [d.to_dict() for d in self.bad_payload_examples],
                "bad_line_examples": [d.to_dict() for d in self.bad_line_examples]}


@dataclass(frozen=True)
class GraphCode:
    """One AOT graph of one compile, as torch logged it (fx's readable code), kept for the page's pictures."""

    rank: int | None
    compile_id: str
    kind: str  # forward | backward | inference
    code: str


#: what a log cannot say about CUDA graphs (said beside ``cudagraph_skips``)
CUDAGRAPH_LIMITS = (
    "re-records at run time (a new input size, a new call path, a static input's address) are not logged: "
    "run with TORCH_LOGS=cudagraphs to see them",
    "skips on inductor's graph-partition path (graph_partition=True) are counted, not logged "
    "(pytorch#193044): a partitioned graph can skip with no reason in the log",
    "cudagraph_skip_reason is written only when the compile asked for CUDA graphs (mode=\"reduce-overhead\"); "
    "on a CPU it is always empty",
)


@dataclass(frozen=True)
class RunLog:
    """Every fact of one run's logs, per rank and in total."""

    log: LogInfo
    graphs_compiled: int
    frames: int  # code objects dynamo compiled (frame ids), summed over processes
    compile_ids: int
    attempts: int
    compiles: tuple[Compile, ...]
    graph_breaks: tuple[BreakSite, ...]
    break_records: int
    recompiles: tuple[Recompile, ...]
    recompile_limit: tuple[SkippedFrame, ...]  # frames that hit recompile_limit
    skipped_frames: tuple[SkippedFrame, ...]  # other frames dynamo gave up on
    compile_time: CompileTime
    cudagraph_skips: tuple[CudagraphSkip, ...]
    ranks: tuple[RankFacts, ...]
    desync: tuple[Desync, ...]
    graph_code: tuple[GraphCode, ...] = ()  # only when pictures were asked for
    notes: tuple[str, ...] = ()
    # capture coverage as torch's counters give it (build.captured): None where the log cannot say (a note says why)
    calls_captured: int | None = None
    fallbacks_to_eager: int | None = None

    @property
    def distributed(self) -> bool:
        return any(r.rank is not None for r in self.ranks)

    def summary(self) -> str:
        """``6 graphs compiled in 7 compiles, 1 graph-break site (2 breaks), 10 calls captured, 1 fallback to eager,
        4 recompiles (1 past recompile_limit), 45.6 s compiling``."""
        from graphtool.text import count

        parts = [f"{count(self.graphs_compiled, 'graph')} compiled in {count(self.compile_ids, 'compile')}"]
        sites = self.graph_breaks
        parts.append(count(len(sites), "graph-break site") + (f" ({count(self.break_records, 'break')})" if sites else ""))
        if self.calls_captured is not None:  # beside the breaks: what the graphs hold (nested breaks add both)
            parts.append(count(self.calls_captured, "call") + " captured")
        if self.fallbacks_to_eager is not None:
            parts.append(count(self.fallbacks_to_eager, "fallback") + " to eager")
        rec = count(len(self.recompiles), "recompile")
        if self.recompile_limit:
            rec += f" ({len(self.recompile_limit)} past recompile_limit)"
        parts.append(rec)
        if self.skipped_frames:
            parts.append(count(len(self.skipped_frames), "skipped frame"))
        seconds = self.compile_time.seconds
        parts.append(f"{seconds:.1f} s compiling" if seconds >= 0.95 else f"{seconds:.2f} s compiling")
        if self.desync:
            parts.append("ranks out of step (desync)")
        return ", ".join(parts)

    def to_dict(self) -> dict:
        return {
            "graphs_compiled": self.graphs_compiled,
            "frames": self.frames,
            "compile_ids": self.compile_ids,
            "attempts": self.attempts,
            "graph_breaks": [b.to_dict() for b in self.graph_breaks],
            "break_records": self.break_records,
            "recompiles": [r.to_dict() for r in self.recompiles],
            "recompile_limit": [s.to_dict() for s in self.recompile_limit],
            "skipped_frames": [s.to_dict() for s in self.skipped_frames],
            "compile_time": self.compile_time.to_dict(),
            "calls_captured": self.calls_captured,
            "fallbacks_to_eager": self.fallbacks_to_eager,
            "cudagraph_skips": [c.to_dict() for c in self.cudagraph_skips],
            "cudagraph_limits": list(CUDAGRAPH_LIMITS),
            "ranks": [r.to_dict() for r in self.ranks],
            "desync": [d.to_dict() for d in self.desync],
            "compiles": [c.to_dict() for c in self.compiles],
            "log": self.log.to_dict(),
            "notes": list(self.notes),
        }
