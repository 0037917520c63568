"""Where a real compile's time went, and what compiling the repeated blocks one by one would change (torch-free).

Built from what ``graphtool compile``'s children left: each child's own measurements (an eager step, the first
compiled call, the compiled step, with the host clock) and its TORCH_TRACE log, whose ``compilation_metrics``
records are torch's own timers, turned into exclusive phases by :mod:`graphtool.analysis.compile_phases` (the same
code ``graphtool log`` reads them with). One :class:`Frame` per compile id and direction (a frame's forward; its
backward, compiled lazily at the first backward); graphtool's marker artifacts in the log say which stage of the
child each record belongs to (``whole``, ``probe``, ``warm``, ``regional``), so the probe's dynamo-only compiles
never count in the model's compile.

The JSON names (``docs/json-report.md``, ``graphtool/schema/compile.schema.json``): ``phases``, ``frames``,
``repeated_blocks``, ``full`` {``seconds``, ``step_seconds``}, ``regional`` {``seconds``, ``step_seconds``,
``hazards``}, ``advice``, and the rest this module documents.

Example::

    >>> full = CompileRun("whole", first_call_seconds=12.5, eager_step_seconds=0.5, step_seconds=0.1, frames=(
    ...     Frame("0/0", "forward", "forward", "m.py", 7, 9.0, {"dynamo": 1.0, "aot_autograd": 2.0, "inductor": 6.0}, 40),
    ...     Frame("0/0", "backward", None, None, None, 2.0, {"inductor": 2.0}, None)))
    >>> full.seconds, full.compile_seconds, full.phases()["inductor"]
    (12.0, 11.0, 8.0)
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Optional

from graphtool.analysis.compile_phases import PHASES, TITLES, add_phases, cache_counts, is_backward, phase_seconds, total_seconds
from graphtool.analysis.module_names import module_fqn
from graphtool.analysis.repeated_blocks import Hazard, RepeatedBlock, nested_change, regional_change, span
from graphtool.text import count

SCHEMA_VERSION = 1

#: torch's timed events (``dynamo_timed`` names in chromium events) -> the phase they belong to, innermost first
_EVENT_PHASES = (
    ("autotune", "autotune"),
    ("async_compile.wait", "triton"), ("compile_file", "triton"), ("triton", "triton"),
    ("code_gen", "code_gen"), ("GraphLowering.codegen", "code_gen"), ("Scheduler", "code_gen"),
    ("PythonWrapperCodegen", "code_gen"), ("GraphLowering.compile_to", "code_gen"),
    ("inductor_compile", "inductor"), ("fx_codegen_and_compile", "inductor"), ("GraphLowering.run", "inductor"),
    ("post_grad", "inductor"),
    ("create_aot_dispatcher_function", "aot_autograd"), ("aot_", "aot_autograd"), ("joint_graph", "aot_autograd"),
    ("min_cut", "aot_autograd"), ("pre_grad", "aot_autograd"), ("backend_compile", "aot_autograd"),
    ("bw_compiler", "aot_autograd"), ("entire_backward_compile", "aot_autograd"),
    ("bytecode_tracing", "dynamo"), ("build_guards", "dynamo"), ("entire_frame_compile", "dynamo"), ("dynamo", "dynamo"),
)


def phase_now(open_events: list[tuple[str, Optional[str]]]) -> Optional[str]:
    """What torch is doing, from the events open now (outermost first): ``"0/0 backward: C++/Triton compile"``.

    >>> phase_now([("dynamo", "0/0"), ("entire_frame_compile", "0/0"), ("backend_compile", "0/0"), ("inductor_compile", "0/0")])
    '0/0: inductor lowering'
    >>> phase_now([("entire_backward_compile", "0/0"), ("async_compile.wait", "0/0")])
    '0/0 backward: C++/Triton compile'
    >>> phase_now([]) is None
    True
    """
    for name, cid in reversed(open_events):
        key = next((k for pat, k in _EVENT_PHASES if pat in name), None)
        if key is not None:
            backward = any("backward" in n or "bw_compiler" in n for n, _ in open_events)
            return f"{cid or '?'}{' backward' if backward else ''}: {TITLES[key]}"
    return None


@dataclass(frozen=True)
class Frame:
    """One compile torch timed: a frame's forward (dynamo and everything its backend did) or its lazily compiled
    backward; ``seconds`` torch's own total and ``phases`` its exclusive parts (they add up to it)."""

    compile_id: str
    kind: str  # forward | backward
    name: Optional[str]
    file: Optional[str]
    line: Optional[int]
    seconds: Optional[float]
    phases: dict = field(default_factory=dict)
    nodes: Optional[int] = None  # op nodes dynamo put in the graph (forward frames)
    recompile_reason: Optional[str] = None
    fail: Optional[str] = None
    cache: dict = field(default_factory=dict)
    stage: str = "whole"

    def to_dict(self) -> dict:
        return {"compile_id": self.compile_id, "kind": self.kind, "function": self.name, "file": self.file, "line": self.line,
                "seconds": _r(self.seconds), "phases": {k: _r(v) for k, v in self.phases.items()}, "nodes": self.nodes,
                "recompile_reason": self.recompile_reason, "fail": self.fail, "cache": dict(self.cache), "stage": self.stage}


def read_frames(records: Iterable, marker: str) -> list[Frame]:
    """The frames of a child's log, in order, each with the stage its records fell in (``marker``: the name of
    graphtool's stage artifact; records before any marker are stage ``""``)."""
    return read_log(records, marker)[0]


def read_log(records: Iterable, marker: str) -> tuple[list[Frame], dict[str, float]]:
    """:func:`read_frames`, and per stage the seconds C++ kernel compiles ran *while torch generated code*: time
    covered by ``compile_file`` chromium events and by ``code_gen``, but not by ``async_compile.wait``. On a CPU
    inductor compiles some kernels at once (or in threads, overlapping) instead of in its pool, and torch's metrics
    count that time as code generation, not as the C++/Triton compile. Coverage, not a sum of durations: events of
    several threads overlap. The phases stay torch's; this says how much of code generation was compiling."""
    stage = ""
    out = []
    clock = _Coverage()
    for rec in records:
        if rec.name == "artifact" and rec.artifact == marker:
            stage = (rec.payload or "").strip()
            continue
        if rec.name == "chromium_event":
            clock.event(rec.payload, stage)
            continue
        if rec.name not in ("compilation_metrics", "bwd_compilation_metrics") or not isinstance(rec.meta, dict):
            continue
        m = rec.meta
        backward = rec.name.startswith("bwd_") or is_backward(m)
        cid = rec.compile_id or (str(m.get("compile_id")) if m.get("compile_id") else "?")
        fail = f"{m.get('fail_type')}: {m.get('fail_reason')}" if m.get("fail_type") else None
        nodes = m.get("graph_op_count")
        out.append(Frame(cid, "backward" if backward else "forward", m.get("co_name"), m.get("co_filename"),
                         m.get("co_firstlineno"), total_seconds(m), phase_seconds(m), nodes if isinstance(nodes, int) else None,
                         m.get("recompile_reason"), fail, cache_counts(m), stage))
    return out, clock.inline_compiles()


class _Coverage:
    """When each of a few of torch's timed events was open (any thread), per stage: intervals where the count of
    begun-not-ended events of that name is above zero."""

    NAMES = ("compile_file", "code_gen", "async_compile.wait")

    def __init__(self):
        self.open: dict[tuple[str, str], tuple[int, float]] = {}
        self.spans: dict[tuple[str, str], list[tuple[float, float]]] = {}

    def event(self, payload: Optional[str], stage: str) -> None:
        import json

        try:
            event = json.loads(payload or "")
        except ValueError:
            return
        name, ph, ts = event.get("name"), event.get("ph"), event.get("ts")
        if name not in self.NAMES or ph not in ("B", "E") or not isinstance(ts, (int, float)):
            return
        key = (stage, name)
        n, since = self.open.get(key, (0, ts))
        if ph == "B":
            self.open[key] = (n + 1, ts if n == 0 else since)
        elif n > 0:
            if n == 1:
                self.spans.setdefault(key, []).append((since / 1e6, ts / 1e6))
            self.open[key] = (n - 1, since)

    def inline_compiles(self) -> dict[str, float]:
        out = {}
        for stage in {k[0] for k in self.spans}:
            cf, cg, aw = (self.spans.get((stage, n), []) for n in self.NAMES)
            both = _intersect(cf, cg)
            out[stage] = round(_length(both) - _length(_intersect(both, aw)), 6)
        return out


def _intersect(a: list[tuple[float, float]], b: list[tuple[float, float]]) -> list[tuple[float, float]]:
    """The overlap of two lists of disjoint, ordered intervals."""
    out, i, j = [], 0, 0
    while i < len(a) and j < len(b):
        lo, hi = max(a[i][0], b[j][0]), min(a[i][1], b[j][1])
        if lo < hi:
            out.append((lo, hi))
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return out


def _length(spans: list[tuple[float, float]]) -> float:
    return sum(hi - lo for lo, hi in spans)


def wants_record(name: str, meta: Any, marker: str) -> bool:
    """The payloads :func:`read_log` needs: graphtool's stage markers and torch's timed events."""
    return name == "chromium_event" or (name == "artifact" and isinstance(meta, dict) and meta.get("name") == marker)


@dataclass(frozen=True)
class Failure:
    """Why a stage stopped: torch's error at the user's line (``kind`` ``compile_failed``), or ``timeout``."""

    kind: str
    message: str
    stage: Optional[str] = None  # the child's stage, or torch's (``inductor lowering``)
    file: Optional[str] = None
    line: Optional[int] = None

    def where(self) -> str:
        return f"{self.file}:{self.line}" if self.file and self.line else ""

    def to_dict(self) -> dict:
        return {"kind": self.kind, "message": self.message, "stage": self.stage, "file": self.file, "line": self.line}


@dataclass(frozen=True)
class CompileRun:
    """One child's compile: ``whole`` (torch.compile(model)), ``warm`` (the same with caches on) or ``regional``
    (each repeated block compiled on its own). ``seconds``: the first compiled call's extra wall time over an eager
    step, what a user waits; ``compile_seconds``: torch's own total of its frames."""

    stage: str
    first_call_seconds: Optional[float] = None
    eager_step_seconds: Optional[float] = None
    step_seconds: Optional[float] = None
    frames: tuple[Frame, ...] = ()
    torch_totals: dict = field(default_factory=dict)
    failure: Optional[Failure] = None
    blocks: tuple[str, ...] = ()  # regional: the modules compiled one by one
    step_samples: tuple[float, ...] = ()  # each timed compiled step
    eager_samples: tuple[float, ...] = ()  # each timed eager step
    inline_cpp_seconds: float = 0.0  # C++ kernel compiles torch ran while generating code (counted in code_gen)
    first_call_cpu: Optional[float] = None  # CPU seconds of the first call (the process and the compilers it waited for)
    eager_step_cpu: Optional[float] = None

    @property
    def cpu_seconds(self) -> Optional[float]:
        """``seconds`` in CPU time: what the compile cost the machine, which a busy machine's other work barely
        moves (the wall clock does)."""
        if self.first_call_cpu is None:
            return None
        return max(0.0, self.first_call_cpu - (self.eager_step_cpu or 0.0))

    def step_spread(self) -> Optional[float]:
        """How far the compiled steps' samples spread, as a fraction of their median (None: fewer than two)."""
        return _spread(self.step_samples)

    @property
    def seconds(self) -> Optional[float]:
        if self.first_call_seconds is None:
            return None
        return max(0.0, self.first_call_seconds - (self.eager_step_seconds or 0.0))

    @property
    def compile_seconds(self) -> float:
        return round(sum(f.seconds or 0.0 for f in self.frames), 6)

    def phases(self) -> dict[str, float]:
        return add_phases(f.phases for f in self.frames)

    def by_kind(self) -> dict[str, float]:
        out = {"forward": 0.0, "backward": 0.0}
        for f in self.frames:
            out[f.kind] = out.get(f.kind, 0.0) + (f.seconds or 0.0)
        return {k: round(v, 6) for k, v in out.items()}

    def cache(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for f in self.frames:
            for k, v in f.cache.items():
                out[k] = out.get(k, 0) + v
        return out

    def to_dict(self) -> dict:
        return {"seconds": _r(self.seconds), "step_seconds": _r(self.step_seconds),
                "first_call_seconds": _r(self.first_call_seconds), "eager_step_seconds": _r(self.eager_step_seconds),
                "compile_seconds": _r(self.compile_seconds), "phases": {k: _r(v) for k, v in self.phases().items()},
                "step_samples": [_r(x) for x in self.step_samples], "eager_step_samples": [_r(x) for x in self.eager_samples],
                "forward_backward": self.by_kind(), "frames": len(self.frames), "cache": self.cache(),
                "cpp_compile_in_code_gen": _r(self.inline_cpp_seconds), "cpu_seconds": _r(self.cpu_seconds),
                "failure": self.failure.to_dict() if self.failure else None}


@dataclass(frozen=True)
class ModuleSize:
    """A module (or a run of identical siblings, ``count`` > 1) and the op nodes it puts in the whole graph."""

    fqn: str
    cls: str
    nodes: int
    share: float
    count: int = 1

    def to_dict(self) -> dict:
        return {"fqn": self.fqn, "class": self.cls, "nodes": self.nodes, "share": round(self.share, 4), "count": self.count}


def biggest_modules(whole_graphs: list[dict], limit: int = 6) -> list[ModuleSize]:
    """The modules that make the biggest share of the whole graph: the root's children, a module with more than
    half of the nodes replaced by its own children, identical siblings (one class, one size) as one row."""
    nodes: dict[str, int] = {}
    classes: dict[str, str] = {}
    total = sum(int(g.get("nodes") or 0) for g in whole_graphs)
    for g in whole_graphs:
        for entry in g.get("modules") or ():
            fqns = {}
            for path, cls in entry["stack"]:
                fqn = module_fqn(path)
                if fqn:
                    fqns[fqn] = cls
            for fqn, cls in fqns.items():
                nodes[fqn] = nodes.get(fqn, 0) + int(entry["nodes"])
                classes.setdefault(fqn, cls)
    if not total or not nodes:
        return []

    def parent(fqn: str) -> Optional[str]:
        parts = fqn.split(".")
        for i in range(len(parts) - 1, 0, -1):
            p = ".".join(parts[:i])
            if p in nodes:
                return p
        return None

    children: dict[Optional[str], list[str]] = {}
    for fqn in nodes:
        children.setdefault(parent(fqn), []).append(fqn)
    shown = list(children.get(None, []))
    while True:
        big = next((f for f in shown if nodes[f] > total / 2 and children.get(f)), None)
        if big is None:
            break
        i = shown.index(big)
        shown[i:i + 1] = children[big]
    rows = _runs([(f, classes[f], nodes[f]) for f in shown], total)
    return sorted(rows, key=lambda r: -r.nodes * r.count)[:limit]


def _runs(items: list[tuple[str, str, int]], total: int) -> list[ModuleSize]:
    out: list[ModuleSize] = []
    group: list[tuple[str, str, int]] = []

    def flush():
        if group:
            fqns = [f for f, _, _ in group]
            out.append(ModuleSize(span(fqns), group[0][1], group[0][2], group[0][2] / total, len(group)))
            group.clear()

    for item in items:
        f, cls, n = item
        if group and (cls, n, f.rpartition(".")[0]) == (group[-1][1], group[-1][2], group[-1][0].rpartition(".")[0]):
            group.append(item)
            continue
        flush()
        group.append(item)
    flush()
    return out


@dataclass(frozen=True)
class CompileReport:
    """Everything ``graphtool compile`` found for one model (see the module's docstring)."""

    path: str
    entry: Optional[str]
    graphtool_version: str
    torch_version: Optional[str]
    device: Optional[str]
    backend: str
    mode: Optional[str]
    training: Optional[bool]
    caches: str  # "off" (cold, TORCHINDUCTOR_FORCE_DISABLE_CACHES) | "empty" (--warm's first process)
    full: CompileRun
    warm: Optional[CompileRun] = None
    regional: Optional[CompileRun] = None
    blocks: tuple[RepeatedBlock, ...] = ()
    modules: tuple[ModuleSize, ...] = ()
    hazards: tuple[Hazard, ...] = ()
    nested_compile_region: bool = False  # the installed torch has torch.compiler.nested_compile_region
    regional_asked: bool = False
    stopped: Optional[Failure] = None  # the compile failed, or --timeout ended a child: what finished is above

    @property
    def eager_step_seconds(self) -> Optional[float]:
        return self.full.eager_step_seconds

    @property
    def identical_blocks(self) -> list[RepeatedBlock]:
        return [b for b in self.blocks if b.identical]

    def gpu_note(self) -> Optional[str]:
        """On a CPU: which phases a GPU changes, and which it does not."""
        if (self.device or "cpu") != "cpu" or not self.full.frames or self.backend != "inductor":
            return None
        p = self.full.phases()
        inline = self.full.inline_cpp_seconds
        also = (f", and {inline:.1f} s of code generation was C++ compiles torch ran while generating code"
                if inline >= 0.05 else "")
        return (f"on a CPU: the C++/Triton compile phase ({p['triton']:.1f} s here) is the C++ compile of CPU kernels"
                f"{also}; autotuning took {p['autotune']:.1f} s; both differ on a GPU (Triton kernels, autotuning "
                f"under max-autotune); dynamo ({p['dynamo']:.1f} s) and AOT autograd ({p['aot_autograd']:.1f} s) do not")

    def advice(self) -> list[Advice]:
        return advice(self)

    def to_dict(self) -> dict:
        regional = None
        if self.regional is not None:
            regional = dict(self.regional.to_dict(), blocks=list(self.regional.blocks),
                            hazards=[h.to_dict() for h in self.hazards])
        return {
            "schema_version": SCHEMA_VERSION,
            "graphtool_version": self.graphtool_version,
            "torch_version": self.torch_version,
            "model": {"path": self.path, "entry": self.entry},
            "device": self.device,
            "backend": self.backend,
            "mode": self.mode,
            "training": self.training,
            "caches": self.caches,
            "eager": {"step_seconds": _r(self.eager_step_seconds)},
            "full": self.full.to_dict(),
            "phases": {k: _r(v) for k, v in self.full.phases().items()},
            "forward_backward": self.full.by_kind(),
            "frames": [f.to_dict() for f in self.full.frames],
            "torch_totals": {k: _r(v) for k, v in sorted(self.full.torch_totals.items())},
            "modules": [m.to_dict() for m in self.modules],
            "repeated_blocks": [b.to_dict() for b in self.blocks],
            "warm": self.warm.to_dict() if self.warm else None,
            "regional": regional,
            "advice": [a.to_dict() for a in self.advice()],
            "gpu_note": self.gpu_note(),
            "stopped": self.stopped.to_dict() if self.stopped else None,
        }


@dataclass(frozen=True)
class Advice:
    """One thing to do: ``text`` in words, ``code`` the line to write (or None)."""

    text: str
    code: Optional[str] = None

    def to_dict(self) -> dict:
        return {"text": self.text, "code": self.code}


def advice(report: CompileReport) -> list[Advice]:
    """What to do about this model's compile time, most useful first."""
    out = []
    full, regional = report.full, report.regional
    picked = report.identical_blocks
    if regional is not None and regional.seconds is not None and full.seconds:
        ratio = regional.seconds / full.seconds
        step = ""
        noisy = max(regional.step_spread() or 0.0, full.step_spread() or 0.0)
        if regional.step_seconds and full.step_seconds and noisy > NOISY:
            step = f"; the step times are too noisy to compare (their samples spread {noisy * 100:.0f}%: raise --steps)"
        elif regional.step_seconds and full.step_seconds:
            change = regional.step_seconds / full.step_seconds - 1
            if change >= 0.05:
                why = " (fusion stops at block boundaries)" if report.backend == "inductor" else ""
                step = f"; the compiled step is {change * 100:.0f}% slower{why}"
            elif change <= -0.05:
                step = f"; the compiled step is {-change * 100:.0f}% faster"
            else:
                step = "; the compiled step is as fast"
        cpu = regional.cpu_seconds / full.cpu_seconds if regional.cpu_seconds is not None and full.cpu_seconds else ratio
        saves, wall_says = ratio < 0.8 and cpu < 0.8, ratio < 0.8
        if picked and saves:
            out.append(Advice(f"compile the blocks one by one: {regional.seconds:.1f} s instead of {full.seconds:.1f} s "
                              f"({full.seconds / max(regional.seconds, 1e-9):.1f}x faster){step}; instead of "
                              "torch.compile(model):", regional_change(picked[0], report.backend, report.mode)))
        elif picked and wall_says != (cpu < 0.8):
            out.append(Advice(f"the clocks disagree: compiling the blocks one by one took {regional.seconds:.1f} s against "
                              f"{full.seconds:.1f} s of wall time, {regional.cpu_seconds or 0:.1f} s against "
                              f"{full.cpu_seconds or 0:.1f} s of CPU time (was the machine busy?); measure again on a quiet "
                              f"one{step}. To try it, instead of torch.compile(model):",
                              regional_change(picked[0], report.backend, report.mode)))
        else:
            out.append(Advice(f"keep torch.compile(model): compiling the blocks one by one took {regional.seconds:.1f} s "
                              f"against {full.seconds:.1f} s{step}"))
    elif picked and not report.regional_asked:
        b = picked[0]
        share = f" make {b.share * 100:.0f}% of the graph" if b.share is not None else ""
        out.append(Advice(f"{b.label()}{share}: graphtool compile --regional measures what compiling them one by one "
                          "saves"))
    if picked and report.nested_compile_region and regional is not None:
        out.append(Advice("or keep one graph and compile each block's body once (torch.compiler.nested_compile_region), "
                          "before torch.compile(model):", nested_change(picked[0])))
    if full.frames:
        p = full.phases()
        total = sum(p.values()) or 1.0
        top = max(PHASES, key=lambda ph: p.get(ph.key, 0.0))
        if top.key in ("triton", "code_gen", "autotune") and p[top.key] / total > 0.4:
            out.append(Advice(f"{p[top.key] / total * 100:.0f}% of the compile is {top.title}: inductor's caches skip "
                              "most of it on the next run (graphtool compile --warm shows the hits)"))
        recompiled = [f for f in full.frames if f.kind == "forward" and f.recompile_reason]
        if recompiled:
            out.append(Advice(f"{count(len(recompiled), 'frame')} recompiled in one step "
                              f"({recompiled[0].recompile_reason}): each recompile pays the compile again"))
    return out


@dataclass(frozen=True)
class CompileBudget:
    """``lint --max-compile-seconds``'s judgement of one model: the first compiled call's extra wall time, cold."""

    seconds: Optional[float]
    budget: float
    ok: bool
    text: str

    def to_dict(self) -> dict:
        return {"seconds": _r(self.seconds), "budget": self.budget, "ok": self.ok, "text": self.text}


def judge_compile_budget(report: CompileReport, max_seconds: float) -> CompileBudget:
    """Whether the model's cold compile fits ``max_seconds``; a compile that did not finish never fits.

    >>> run = CompileRun("whole", first_call_seconds=70.1, eager_step_seconds=0.5)
    >>> r = CompileReport("m.py", None, "0", "2.13", "cpu", "inductor", None, True, "off", run)
    >>> judge_compile_budget(r, 60).text
    'compile took 69.6 s, budget 60 s: over by 9.6 s'
    >>> judge_compile_budget(r, 90).ok
    True
    """
    secs = report.full.seconds
    if report.stopped is not None or secs is None:
        why = report.stopped.message if report.stopped else "the compile did not finish"
        return CompileBudget(secs, max_seconds, False, f"compile did not finish ({why}), budget {max_seconds:g} s")
    if secs > max_seconds:
        return CompileBudget(secs, max_seconds, False, f"compile took {secs:.1f} s, budget {max_seconds:g} s: over by {secs - max_seconds:.1f} s")
    return CompileBudget(secs, max_seconds, True, f"compile took {secs:.1f} s, within the budget of {max_seconds:g} s")


def run_from_child(stage: str, raw: dict, frames: list[Frame], failure: Optional[Failure] = None,
                   facts: Optional[dict] = None, inline: Optional[dict] = None) -> CompileRun:
    """A :class:`CompileRun` from a child's result (or, for a child that was stopped, the facts it wrote as it went)
    and the frames of its stage in its log."""
    facts = facts or {}
    first = raw.get("first_call", facts.get(f"{stage}_first_call"))
    return CompileRun(stage, first, raw.get("eager_step", facts.get("eager_step")),
                      raw.get("compiled_step", facts.get("compiled_step")),
                      tuple(f for f in frames if f.stage == stage), dict(raw.get("torch_totals") or {}), failure,
                      tuple(raw.get("blocks_compiled") or ()), tuple(raw.get("compiled_step_samples") or ()),
                      tuple(raw.get("eager_step_samples", facts.get("eager_step_samples")) or ()),
                      (inline or {}).get(stage, 0.0), raw.get("first_call_cpu", facts.get(f"{stage}_first_call_cpu")),
                      raw.get("eager_step_cpu", facts.get("eager_step_cpu")))


def failure_of(raw: dict) -> Optional[Failure]:
    f = raw.get("failure")
    if not f:
        return None
    return Failure("compile_failed", f.get("message") or "torch.compile failed", f.get("stage"), f.get("file"), f.get("line"))


#: steps whose samples spread more than this (max - min over the median) are too noisy to compare
NOISY = 0.2


def _spread(samples) -> Optional[float]:
    if len(samples) < 2:
        return None
    mid = sorted(samples)[len(samples) // 2]
    return (max(samples) - min(samples)) / mid if mid else None


def _r(v: Optional[float]) -> Optional[float]:
    return None if v is None else round(float(v), 6)
