"""The facts of a run's logs, built as the records stream past (memory grows with compiles and sites, not lines).

What each fact is read from (torch 2.11-2.15):

- a compile: ``dynamo_start`` (the frame starts tracing; ``attempt`` counts restarts), ``dynamo_output_graph``
  (a graph handed to the backend; its md5 is the graph's signature), ``compilation_metrics`` (the frame's name,
  file and line, outcome, recompile reason, times, caches, ``cudagraph_skip_reason``) and
  ``bwd_compilation_metrics`` (a backward compiled lazily at its first call);
- a graph break: an ``artifact`` named ``dynamo_graph_break_reason`` ("Graph break in user code at FILE:N");
- a recompile: an ``artifact`` named ``recompile_reasons``, the guards that failed; a compile refused past
  ``recompile_limit`` has a ``compilation_metrics`` whose ``fail_reason`` says so;
- graphs compiled: the graphs of a compile's last attempt, unless the compile failed (torch's
  ``counters["stats"]["unique_graphs"]`` counts a graph only once the backend returns);
- capture coverage (:func:`captured`): ``calls_captured``, the sum of ``compilation_metrics``' ``graph_op_count``
  (dynamo counts both with ``count_calls`` on the graph it compiles), and ``fallbacks_to_eager``, the compiles that
  failed (``fail_type``: torch's ``frames`` total minus ok, a frame whose conversion raised).
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from graphtool.analysis import compile_phases as cp
from graphtool.analysis.run_log.facts import (
    BreakSite,
    Compile,
    CompileTime,
    CudagraphSkip,
    FrameTime,
    GraphCode,
    LogInfo,
    RankFacts,
    Recompile,
    RunLog,
    SkippedFrame,
    rank_label,
)
from graphtool.capture.torch_trace import LogReader, Record

_BREAK, _RECOMPILE, _VERSION = "dynamo_graph_break_reason", "recompile_reasons", "torch_version"
_AOT_GRAPHS = {"aot_forward_graph": "forward", "aot_backward_graph": "backward", "aot_inference_graph": "inference"}
#: AOT graphs kept for the page's pictures at most (each compile's forward and backward): a page of a few
#: dozen graphs is what a person reads, and the graphs of a 500 MB log would not fit in memory
PICTURE_LIMIT = 24


#: the records the facts read; the others (most of a log: chromium_event, describe_*, guards) are only counted
READ = frozenset({"dynamo_start", "dynamo_output_graph", "compilation_metrics", "bwd_compilation_metrics",
                  "compilation_metrics_runtime", "bwd_compilation_metrics_runtime", "artifact", *_AOT_GRAPHS})


def wants(pictures: bool):
    """The payloads the facts read: break and recompile reasons, torch's version (and the AOT graphs for pictures)."""
    def want(name: str, meta: Any) -> bool:
        if name == "artifact":
            return meta.get("name") in (_BREAK, _RECOMPILE, _VERSION)
        return pictures and name in _AOT_GRAPHS
    return want


@dataclass
class _Compile:
    """What one compile id's records said, as they came."""

    last_attempt: int = 0
    graphs: dict = field(default_factory=dict)  # attempt -> [digest, ...]
    metrics: dict | None = None
    bwd: list = field(default_factory=list)  # bwd_compilation_metrics
    reasons: list = field(default_factory=list)  # recompile_reasons
    started: bool = False
    runtime: list = field(default_factory=list)


@dataclass
class _Process:
    """One file (one process) of the run."""

    compiles: dict = field(default_factory=dict)  # (compiled_autograd_id, frame_id, frame_compile_id) -> _Compile
    breaks: list = field(default_factory=list)  # (compile key, GraphBreak | None, attempt)
    torch_version: str | None = None


def _key(r: Record) -> tuple:
    return (r.compiled_autograd_id, r.frame_id, r.frame_compile_id)


class RunLogBuilder:
    """Feed it records (:meth:`add`); :meth:`finish` gives the :class:`RunLog`."""

    def __init__(self, reader: LogReader, pictures: bool = False):
        self.reader = reader
        self.pictures = pictures
        self.processes: dict[int, _Process] = defaultdict(_Process)
        self.graph_code: list[GraphCode] = []
        self.pictures_left_out = 0

    def add(self, r: Record) -> None:
        p = self.processes[r.file]
        name = r.name
        if r.frame_id is None and r.compiled_autograd_id is None:
            if r.artifact == _VERSION and r.payload:
                p.torch_version = _version(r.payload) or p.torch_version
            elif r.artifact == _BREAK:  # a break with no compile id: kept, with no frame
                p.breaks.append((None, _parse_break(r), 0))
            return
        c = p.compiles.get(_key(r))
        if c is None:
            c = p.compiles[_key(r)] = _Compile()
        if r.attempt is not None and r.attempt > c.last_attempt:
            c.last_attempt = r.attempt
        if name == "dynamo_start":
            c.started = True
        elif name == "dynamo_output_graph":
            c.graphs.setdefault(r.attempt or 0, []).append(r.digest or "")
        elif name == "compilation_metrics" and isinstance(r.meta, dict):
            c.metrics = _slim(r.meta)
            if p.torch_version is None and r.meta.get("pytorch_version"):
                p.torch_version = str(r.meta["pytorch_version"])
        elif name == "bwd_compilation_metrics" and isinstance(r.meta, dict):
            c.bwd.append(_slim(r.meta))
        elif name in ("compilation_metrics_runtime", "bwd_compilation_metrics_runtime") and isinstance(r.meta, dict):
            c.runtime.append(cp.runtime_seconds(r.meta))
        elif name == "artifact":
            art = r.artifact
            if art == _BREAK:
                p.breaks.append((_key(r), _parse_break(r), r.attempt or 0))
            elif art == _RECOMPILE:
                c.reasons.extend(_reasons(r.payload) if r.payload_ok else ["(the reasons' payload is damaged)"])
        elif name in _AOT_GRAPHS and r.payload is not None:
            if len(self.graph_code) < PICTURE_LIMIT * 2:
                self.graph_code.append(GraphCode(r.rank, r.compile_id or "?", _AOT_GRAPHS[name], r.payload))
            else:
                self.pictures_left_out += 1

    def finish(self) -> RunLog:
        files = self.reader.files
        rank_of = {i: f.rank for i, f in enumerate(files)}
        compiles: list[Compile] = []
        per_file: dict[int, list[Compile]] = {}
        for fi, p in sorted(self.processes.items()):
            names = {k[:2]: c.metrics for k, c in p.compiles.items() if c.metrics and c.metrics.get("co_name")}
            made = [_compile(rank_of.get(fi), k, c, names.get(k[:2])) for k, c in sorted(p.compiles.items(), key=_order)]
            per_file[fi] = made
            compiles.extend(made)
        sites = _break_sites(self.processes, per_file, rank_of)
        file_recompiles = {fi: _recompiles(per_file[fi], self.processes[fi]) for fi in sorted(per_file)}
        recompiles = [r for fi in sorted(per_file) for r in file_recompiles[fi]]
        limit = tuple(_skipped(c) for c in compiles if c.outcome == "recompile limit")
        skipped = tuple(_skipped(c) for c in compiles if c.outcome == "failed")
        info = _info(self.reader, self.processes)
        counted = {fi: captured(self.processes[fi], info.bad_lines) for fi in sorted(per_file)}
        ranks = _ranks(files, per_file, self.processes, file_recompiles, counted)
        notes = list(dict.fromkeys(why for *_, why in counted.values() if why))
        if self.pictures_left_out:
            notes.append(f"{self.pictures_left_out} more AOT graphs are in the log than the page draws ({PICTURE_LIMIT * 2})")
        claimed = defaultdict(list)
        for f in files:
            if f.records:
                claimed[f.rank].append(f.path)
        for rank, paths in claimed.items():
            if len(paths) > 1:
                notes.append(f"{len(paths)} files are {rank_label(rank)}'s: logs of several runs or processes in one "
                             "folder? Each is read as its own process")
        from graphtool.analysis.run_log.desync import desyncs

        return RunLog(
            log=info,
            graphs_compiled=sum(c.graphs for c in compiles),
            frames=sum(len({c.frame_id for c in made}) for made in per_file.values()),
            compile_ids=len(compiles),
            attempts=sum(c.attempts for c in compiles),
            compiles=tuple(compiles),
            graph_breaks=tuple(sites),
            break_records=sum(len(p.breaks) for p in self.processes.values()),
            recompiles=tuple(recompiles),
            recompile_limit=limit,
            skipped_frames=skipped,
            compile_time=_compile_time(compiles, self.processes),
            cudagraph_skips=tuple(_cudagraph_skips(compiles, self.processes, per_file)),
            ranks=tuple(ranks),
            desync=tuple(desyncs(per_file, sites, recompiles, rank_of, files)),
            graph_code=tuple(self.graph_code),
            notes=tuple(notes),
            calls_captured=_total(c[0] for c in counted.values()),
            fallbacks_to_eager=_total(c[1] for c in counted.values()),
        )


def read_run_log(paths: Iterable, *, pictures: bool = False, reader: LogReader | None = None) -> RunLog:
    """Read every record of ``paths`` (files, folders, ``.log.gz``) and return the run's facts.

    >>> import io
    >>> from tests.log.handmade import small_log
    >>> facts = read_run_log([("x.log", io.BytesIO(small_log()))])
    >>> facts.graphs_compiled, [(b.file, b.line, b.gb_id, b.count) for b in facts.graph_breaks], len(facts.recompiles)
    (3, [('/app/model.py', 13, 'gb0059', 1)], 1)
    """
    if reader is None:
        from graphtool.capture.torch_trace import log_files

        sources = [p for p in paths]
        files = log_files([p for p in sources if not isinstance(p, tuple)])
        reader = LogReader([p for p in sources if isinstance(p, tuple)] + files, want=wants(pictures), names=READ)
    builder = RunLogBuilder(reader, pictures)
    for r in reader.records():
        builder.add(r)
    return builder.finish()


def read_logs(paths, *, pictures: bool = False, on_files=None) -> RunLog:
    """:func:`read_run_log` for the doors (``graphtool log``, ``lint --log``, ``report --log``): a path that does not
    exist, a folder with no log, an unreadable file, or files without one structured-trace record raise
    :class:`~graphtool.errors.UsageError` (exit 2) naming the path. ``on_files(n)`` hears how many files there are."""
    from graphtool.capture.torch_trace import log_files
    from graphtool.errors import UsageError

    if not paths:
        raise UsageError("no log given: name a TORCH_TRACE folder, .log or .log.gz files")
    try:
        files = log_files(paths)
    except FileNotFoundError as exc:
        raise UsageError(f"{exc.args[0]}: no such file or folder") from None
    if not files:
        raise UsageError(f"{', '.join(map(str, paths))}: no TORCH_TRACE log here (no *.log or *.log.gz file)",
                         hint="run the job with TORCH_TRACE=DIR set; torch writes one dedicated_log_torch_trace_*.log "
                              "per process there")
    for f in files:
        try:
            with open(f, "rb"):
                pass
        except OSError as exc:
            raise UsageError(f"{f}: cannot be read ({exc.strerror or exc})") from None
    if on_files is not None:
        on_files(len(files))
    facts = read_run_log(files, pictures=pictures)
    if facts.log.records == 0:
        lines = facts.log.lines
        raise UsageError(f"{', '.join(map(str, paths))}: not a TORCH_TRACE log ({lines} line{'s' if lines != 1 else ''} "
                         "read, none a structured-trace record)",
                         hint="TORCH_TRACE=DIR python train.py writes the logs graphtool log and tlparse read")
    return facts


# -- one compile ----------------------------------------------------------------------------------------------

_KEEP = ("co_name", "co_filename", "co_firstlineno", "graph_op_count", "fail_type", "fail_reason", "recompile_reason",
         "cudagraph_skip_reason", "is_forward", "pytorch_version", "compile_id", "is_runtime")


def _slim(meta: dict) -> dict:
    """What the facts read of a metrics record (its configs are most of its bytes)."""
    out = {k: meta.get(k) for k in _KEEP}
    out["seconds"] = cp.total_seconds(meta)
    out["phases"] = cp.phase_seconds(meta)
    out["cache"] = cp.cache_counts(meta)
    out["backward"] = cp.is_backward(meta)
    return out


def _order(item) -> tuple:
    (ca, frame, fcid), _ = item
    return (ca if ca is not None else -1, frame if frame is not None else -1, fcid if fcid is not None else -1)


def _cid(key: tuple) -> str:
    ca, frame, fcid = key
    if ca is not None:
        return f"!{ca}" + (f"/{frame}/{fcid}" if frame is not None else "")
    return f"{frame}/{fcid}"


def _compile(rank, key: tuple, c: _Compile, named: dict | None) -> Compile:
    from graphtool.capture.graph_breaks import hit_recompile_limit

    m = c.metrics or {}
    name_from = m if m.get("co_name") else (named or {})
    fail_type, fail_reason = m.get("fail_type"), m.get("fail_reason")
    final = c.graphs.get(c.last_attempt, [])
    if fail_type:
        outcome = "recompile limit" if hit_recompile_limit(fail_reason) else "failed"
        graphs: list = []
    else:
        graphs = final
        outcome = "compiled" if graphs else "no graph"
    bwd_seconds = sum(b["seconds"] or 0.0 for b in c.bwd) if c.bwd else None
    cache = cp.cache_counts({})
    for part in [m.get("cache") or {}] + [b.get("cache") or {} for b in c.bwd]:
        for k, v in part.items():
            cache[k] += v
    skip = m.get("cudagraph_skip_reason")
    return Compile(
        rank=rank, compile_id=_cid(key), frame_id=key[1], frame_compile_id=key[2], attempts=c.last_attempt + 1,
        function=name_from.get("co_name"), file=name_from.get("co_filename"), line=name_from.get("co_firstlineno"),
        graphs=len(graphs), ops=m.get("graph_op_count"), outcome=outcome, fail_type=fail_type,
        fail_reason=fail_reason, recompile_reason=m.get("recompile_reason"), seconds=m.get("seconds"),
        backward_seconds=bwd_seconds, phases=m.get("phases") or {},
        backward_phases=cp.add_phases(b["phases"] for b in c.bwd) if c.bwd else {}, cache=cache,
        cudagraph_skip_reason=str(skip) if skip else None, signature=tuple(graphs))


def _skipped(c: Compile) -> SkippedFrame:
    from graphtool.text import first_line

    limit = c.outcome == "recompile limit"
    reason = first_line(c.fail_reason) or c.fail_type or "?"
    return SkippedFrame(c.rank, c.compile_id, c.function, c.file, c.line, reason, recompile_limit=limit)


def _parse_break(r: Record):
    from graphtool.capture.graph_breaks import parse_break

    if not r.payload_ok or r.payload is None:
        return None
    return parse_break(r.payload, compile_id=r.compile_id)


def _reasons(payload: str | None) -> list[str]:
    """``recompile_reasons``' payload: one reason as text, several as a JSON list."""
    if not payload:
        return []
    text = payload.strip()
    if text.startswith("["):
        try:
            value = json.loads(text)
            return [str(v) for v in value] if isinstance(value, list) else [text]
        except ValueError:
            pass
    if text.startswith('"'):
        try:
            return [str(json.loads(text))]
        except ValueError:
            pass
    return [payload.rstrip("\n")]


def _version(payload: str) -> str | None:
    try:
        v = json.loads(payload).get("pytorch_version")
    except (ValueError, AttributeError):
        return None
    return str(v) if v else None


# -- the run ------------------------------------------------------------------------------------------------------


def _break_sites(processes: dict, per_file: dict, rank_of: dict) -> list[BreakSite]:
    from graphtool.capture.graph_breaks import user_call

    several = len({rank_of.get(fi) for fi, p in processes.items() if p.breaks}) > 1
    sites: dict[tuple, dict] = {}
    for fi, p in sorted(processes.items()):
        by_cid = {c.compile_id: c for c in per_file.get(fi, [])}
        rank = rank_of.get(fi)
        for key, b, _attempt in p.breaks:
            cid = _cid(key) if key else "-"
            frame = by_cid[cid].function if cid in by_cid else None
            if b is None:
                k = (None, None, None)
                entry = sites.setdefault(k, {"reason": "the record's payload is damaged (md5 mismatch): where it broke is unknown",
                                             "hint": None, "skips": False, "user": None, "damaged": True})
            else:
                k = (b.file, b.line, b.code)
                call = user_call(b)
                entry = sites.setdefault(k, {"reason": b.reason, "hint": b.hint, "skips": b.skips_frame,
                                             "user": (call.file, call.line) if call else None, "damaged": False})
                entry["skips"] = entry["skips"] or b.skips_frame
            entry.setdefault("count", 0)
            entry["count"] += 1
            entry.setdefault("ranks", {})[rank] = None
            if frame:
                entry.setdefault("frames", {})[frame] = None
            entry.setdefault("cids", {})[f"{rank_label(rank)}: {cid}" if several else cid] = None
    out = []
    for (file, line, gb), e in sites.items():
        user = e["user"] or (None, None)
        out.append(BreakSite(file, line, gb, e["reason"], e["count"], tuple(e["ranks"]), tuple(e.get("frames", {})),
                             tuple(e["cids"]), e["hint"], e["skips"], user[0], user[1], e["damaged"]))
    out.sort(key=lambda s: (-s.count, s.file or "~", s.line or 0))
    return out


def _recompiles(made: list[Compile], p: _Process) -> list[Recompile]:
    out = []
    for (_key, c), comp in zip(sorted(p.compiles.items(), key=_order), made):
        reasons = list(c.reasons)
        if not reasons and comp.recompile_reason:
            reasons = [comp.recompile_reason]
        if not reasons:
            continue
        guards = tuple(dict.fromkeys(_guard(r) for r in reasons))
        out.append(Recompile(comp.rank, comp.compile_id, comp.function, comp.file, comp.line, guards[0], guards,
                             hit_limit=comp.outcome == "recompile limit"))
    return out


def _guard(reason: str) -> str:
    """A guard failure as one line: torch's first line without the source comment it appends (the user stack
    trace that follows is the frame's, already named).

    >>> _guard("2/0: name == 'a'          # return x + len(name)  # m.py:59 in shift\\nUser stack trace:")
    "2/0: name == 'a'"
    """
    first = next((ln for ln in reason.splitlines() if ln.strip()), "")
    return first.split("  #")[0].strip()


def captured(p: _Process, bad_lines: int = 0) -> tuple[int | None, int | None, str | None]:
    """``(calls_captured, fallbacks_to_eager, why not)`` of one process, as torch's counters give them: ``graph_op_count``
    summed over its compiles (dynamo adds ``count_calls`` of each graph it compiles to ``calls_captured``, and logs the
    same count in the compile's metrics), and the compiles that failed (``frames`` total minus ok counts the frames
    whose conversion raised; each logs its ``fail_type``). A figure the log cannot give exactly is None, with why: a
    compile without metrics (a log cut short), a compile that failed after handing its graph to the backend (torch
    counted its calls; its metrics have no count), several graphs in one compile, or damaged lines.

    >>> p = _Process({(None, 0, 0): _Compile(graphs={0: ["a"]}, metrics={"graph_op_count": 4, "fail_type": None})})
    >>> captured(p)
    (4, 0, None)
    """
    if bad_lines:
        why = f"{bad_lines} damaged line{'s' if bad_lines != 1 else ''}: a compile's metrics may be among them"
        return None, None, f"calls_captured and fallbacks_to_eager are not given: {why}"
    calls: int | None = 0
    fallbacks: int | None = 0
    why = None
    for key, c in sorted(p.compiles.items(), key=_order):
        if key[1] is None:  # compiled autograd's own records: no frame dynamo converted
            continue
        m, graphs = c.metrics, c.graphs.get(c.last_attempt, [])
        if m is None:
            calls = fallbacks = None
            why = why or f"compile {_cid(key)} has no compilation_metrics (a log cut short, or a process that died compiling)"
            continue
        if m.get("fail_type"):
            fallbacks = None if fallbacks is None else fallbacks + 1
            if graphs:  # torch counted the graph's calls before the backend failed; the metrics carry no count
                calls = None
                why = why or f"compile {_cid(key)} failed after dynamo handed its graph to the backend: its calls are not in the log"
        elif len(graphs) > 1 or not isinstance(m.get("graph_op_count"), int):
            calls = None
            why = why or f"compile {_cid(key)} logged {len(graphs)} graphs and one graph_op_count"
        elif calls is not None:
            calls += m["graph_op_count"]
    return calls, fallbacks, (f"{'calls_captured' if fallbacks is not None else 'calls_captured and fallbacks_to_eager'} "
                              f"not given: {why}" if why else None)


def _total(values) -> int | None:
    values = list(values)
    return None if any(v is None for v in values) else sum(values)


def _ranks(files, per_file: dict, processes: dict, recompiles: dict, counted: dict) -> list[RankFacts]:
    out = []
    for fi, made in sorted(per_file.items()):
        f = files[fi]
        p = processes[fi]
        sites = {(b.file, b.line, b.code) if b else None for _, b, _ in p.breaks}
        seconds = sum((c.seconds or 0.0) + (c.backward_seconds or 0.0) for c in made)
        out.append(RankFacts(f.rank, (f.path,), sum(c.graphs for c in made), len(p.breaks), len(sites),
                             len(recompiles.get(fi, ())), seconds, len({c.frame_id for c in made}), len(made),
                             *counted[fi][:2]))
    out.sort(key=lambda r: (r.rank is None, r.rank if r.rank is not None else 0))
    return out


def _compile_time(compiles: list[Compile], processes: dict) -> CompileTime:
    forward = cp.add_phases(c.phases for c in compiles)
    backward = cp.add_phases(c.backward_phases for c in compiles if c.backward_phases)
    both = cp.add_phases([forward, backward])
    frames: dict[tuple, list[Compile]] = {}
    for c in compiles:
        frames.setdefault((c.function, c.file, c.line), []).append(c)
    times = []
    for (fn, file, line), cs in frames.items():
        fw = sum(c.seconds or 0.0 for c in cs)
        bw = sum(c.backward_seconds or 0.0 for c in cs)
        phases = cp.add_phases([cp.add_phases(c.phases for c in cs), cp.add_phases(c.backward_phases for c in cs)])
        times.append(FrameTime(fn, file, line, len(cs), fw, bw, phases))
    times.sort(key=lambda t: -(t.seconds + t.backward_seconds))
    cache = cp.cache_counts({})
    for c in compiles:
        for k, v in c.cache.items():
            cache[k] = cache.get(k, 0) + v
    runtime: dict[str, float] = {}
    for p in processes.values():
        for comp in p.compiles.values():
            for part in comp.runtime:
                for k, v in part.items():
                    runtime[k] = round(runtime.get(k, 0.0) + v, 6)
    fw_total = sum(c.seconds or 0.0 for c in compiles)
    bw_total = sum(c.backward_seconds or 0.0 for c in compiles)
    return CompileTime(fw_total + bw_total, fw_total, bw_total, both, forward, backward, tuple(times), cache, runtime,
                       sum(1 for c in compiles if c.seconds is not None))


def _cudagraph_skips(compiles: list[Compile], processes: dict, per_file: dict) -> list[CudagraphSkip]:
    out = [CudagraphSkip(c.rank, c.compile_id, c.function, "forward", c.cudagraph_skip_reason)
           for c in compiles if c.cudagraph_skip_reason]
    for fi, p in sorted(processes.items()):
        by_cid = {c.compile_id: c for c in per_file.get(fi, [])}
        for key, comp in p.compiles.items():
            for b in comp.bwd:
                if b.get("cudagraph_skip_reason"):
                    c = by_cid.get(_cid(key))
                    out.append(CudagraphSkip(c.rank if c else None, _cid(key), c.function if c else None, "backward",
                                             str(b["cudagraph_skip_reason"])))
    return out


def _info(reader: LogReader, processes: dict) -> LogInfo:
    d = reader.damage
    versions = [p.torch_version for _, p in sorted(processes.items()) if p.torch_version]
    unknown = tuple({"kind": kind, "key": key, "count": n, "file": file, "line": line}
                    for (kind, key), (n, file, line) in sorted(d.unknown.items()))
    return LogInfo(tuple(reader.files), versions[0] if versions else None, sum(f.lines for f in reader.files),
                   sum(f.records for f in reader.files), unknown, d.bad_payloads, d.bad_lines,
                   tuple(d.payload_examples), tuple(d.line_examples))
