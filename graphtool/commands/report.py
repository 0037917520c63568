"""``graphtool report``: every fact about one model in one self-contained HTML page.

Two traces, as the terminal commands make them, of one model (the script runs once): on the model's own
device (the graphs torch.compile sees there: graph breaks, mutations and aliasing, memory) and on the
accelerator stand-in, a meta copy of the same model (devices, the CUDA-graph verdict, and the
pictures, whose red marks are the nodes a GPU run would trip on).
Each forward and backward graph is drawn at every fold level (one box per module at depth 1, 2...,
and every node when the graph is small enough to lay out quickly); the page switches between them.

Example::

    >>> (r,) = report("examples/mlp.py", memory=False)
    >>> [(p.graph, [lv.name for lv in p.levels]) for p in r.pictures]  # doctest: +ELLIPSIS
    [('forward', [..., 'every node']), ('backward', [..., 'every node'])]
"""

from __future__ import annotations

import functools
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Optional

from graphtool.commands import shared
from graphtool.commands.launch import Launch, launch_of
from graphtool.commands.progress import SILENT, Progress
from graphtool.commands.result import Result
from graphtool.schema import stamped

#: pictures with more boxes than this are not laid out: their layout would take seconds, their page megabytes
FULL_LIMIT = 1000
#: seconds one picture's layout may take before it is given up (the page then says so)
LAYOUT_TIMEOUT = 30.0


@dataclass(frozen=True)
class Level:
    """One fold level of one graph, laid out."""

    name: str  # "modules at depth 2", "every node"
    depth: Optional[int]  # None: every node
    svg: str
    boxes: int
    members: dict  # node id folded away -> the box that holds it
    seconds: float  # layout time


@dataclass(frozen=True)
class Picture:
    region: int
    graph: str  # forward | backward
    nodes: int  # the graph's nodes, counted as trace and devices count them (len(graph.nodes))
    edges: int
    levels: tuple[Level, ...]
    default: int  # the level shown first
    facts: dict  # node id -> what a click shows
    drawn: int = 0  # the picture's nodes: the graph's, less the output node, plus one marker per value returned


@dataclass(frozen=True, repr=False)
class ReportResult(Result):
    """Every fact about one model, and its page: :meth:`html` is the whole ``graphtool report`` page,
    ``command`` the line it says made it."""

    command = "report"

    target: str
    trace: Any  # TraceReport (own device)
    verdict: Any  # Verdict (stand-in)
    devices: Any  # DeviceReport (stand-in)
    memory: Any  # MemoryReport, or None
    memory_note: Optional[str]  # why memory is missing, when it is
    pictures: tuple[Picture, ...]
    findings: tuple  # Finding
    stand_in: str  # "meta" or the GPU the stand-in trace ran on
    notes: tuple[str, ...] = ()
    ddp: Any = None  # DdpReport (``--ddp``): the split graphs, each with its CUDA-graph verdict
    fsdp2: Any = None  # Fsdp2Report (``--fsdp2``): units, graphs with their CUDA-graph verdicts, collectives, ranks
    rank_memory: Any = None  # RankMemory (``--fsdp2`` with memory): each rank's bytes, activations included
    fit: Any = None  # FitReport (``--fit``/``--budgets``): the step's predicted peak and its timeline
    shapes: Any = None  # ShapeReport (``--schedule``): the loop over the script's get_input_schedule()
    made_by: str = ""  # the command that makes this report again, as the page says it
    beside_run: Any = None  # (RunLog, Comparison) with ``--log``: a real run's logs beside this prediction

    def summary(self) -> str:
        t = self.trace
        regions = len(t.regions)
        breaks = len(t.breaks)
        parts = [f"{regions} compiled region{'s' if regions != 1 else ''}", f"{breaks} graph break{'s' if breaks != 1 else ''}",
                 t.mutations.verdict()]
        if self.devices is not None:
            parts.append(self.devices.verdict())
        if self.verdict is not None:
            parts.append(self.verdict.summary())
        if self.memory is not None:
            parts.append(self.memory.verdict())
        if self.ddp is not None:
            d = self.ddp
            parts.append(f"under DDP (bucket_cap_mb={d.bucket_cap_mb:g}): {d.graph_count} graph"
                         f"{'s' if d.graph_count != 1 else ''} from {d.dynamo_graphs} dynamo graph{'s' if d.dynamo_graphs != 1 else ''}")
            if (d.unused or {}).get("fails_at_step"):
                parts.append(f"DDP fails at step {d.unused['fails_at_step']}: parameters without gradient")
        if self.fsdp2 is not None:
            from graphtool.text import count

            f = self.fsdp2
            parts.append(f"under FSDP2 ({count(f.world_size, 'rank')}): {count(f.graph_count, 'compiled graph')}")
        return "; ".join(parts)

    def to_dict(self) -> dict:
        """The trace's document (``graphtool trace --format json`` of the own-device trace)."""
        return stamped("trace", self.trace.to_dict())  # the trace's document, as graphtool trace prints it

    def view(self):
        from rich.text import Text

        return Text(self.summary(), style="verdict")

    @functools.cached_property
    def page(self) -> str:
        from graphtool.render.report import format_report

        return format_report(self, command=self.made_by, versions=versions())

    def html(self) -> str:
        """The whole page: summary, findings, pictures, every section (made once)."""
        return self.page

    def _repr_html_(self) -> str:
        from graphtool.render.report import inline_frame

        return inline_frame(self.page, height=800)

    @property
    def report(self):
        return self  # every fact is this object's own (``result.report.trace`` reads as it always did)

    @property
    def title(self) -> str:
        return self.trace.entry

    @property
    def found(self) -> bool:
        return bool(self.findings)

    @property
    def graph_breaks(self) -> list:
        return list(self.trace.breaks)

    @property
    def mutated_inputs(self) -> list:
        return list(self.trace.mutations.mutated)


def versions() -> dict:
    """What made the page: graphtool's, torch's and Python's versions."""
    import torch

    from graphtool import __version__
    from graphtool.render.report import python_version

    return {"graphtool": __version__, "torch": str(torch.__version__), "python": python_version()}


def report(model: Optional[str] = None, *, entry: Optional[str] = None, device: Optional[str] = None,
           inference: bool = False, backend: str = "inductor", memory: bool = True, layout_timeout: float = LAYOUT_TIMEOUT,
           debug: bool = False, progress: Progress = SILENT, ddp: Optional[dict] = None,
           fsdp2: Optional[dict] = None, fit: Optional[str] = None, budgets: Optional[str] = None,
           schedule: bool = False, log: Optional[list] = None) -> list[ReportResult]:
    """One :class:`ReportResult` per model, its pictures laid out (SVG); a picture whose layout
    takes longer than ``layout_timeout`` seconds is left out, and the page says so. ``ddp``
    (``world_size``, ``bucket_cap_mb``, ``find_unused_parameters``): both traces run as
    ``DDP(torch.compile(model))``, each split graph is a region, and the page has a DDP section. ``fsdp2``
    (``world_size``): both traces run under ``fully_shard`` per block and root as rank 0 of a fake
    process group, and the page has an FSDP2 section (units, each graph's CUDA-graph verdict, the eager
    collectives, each rank's memory). ``fit``/``budgets``: a "Will it fit" section, as ``memory --fit``/``--budgets``
    compute it from the same trace. ``schedule``: a section with the loop over the script's ``get_input_schedule()``
    (``graphtool shapes``' prediction, from the same load). ``log`` (a TORCH_TRACE folder or files of a real run of
    the same script): a section with each fact of the run beside graphtool's prediction (``graphtool log --against``)."""
    from graphtool.commands.fit import check_fit

    shared.check_aot_backend(backend)
    check_fit(fit, budgets, ddp=ddp, fsdp2=fsdp2)
    from graphtool.capture.user.deadline import check_timeout

    check_timeout(layout_timeout, "--layout-timeout")
    launch = launch_of(ddp, fsdp2, device)
    if schedule:
        from graphtool.commands.shapes import refuse_schedule_under

        refuse_schedule_under(launch)
    logged = None
    if log:  # read first: a wrong path costs no trace
        from graphtool.analysis.run_log import read_logs

        progress.phase("reading the run's logs...")
        logged = read_logs(log)
    results = []
    for target, ent in shared.targets(model, entry):
        with shared.one_load(standin=True):  # the script runs once: the stand-in is a meta copy of the model it built
            result = _one(target, ent, device, inference, backend, memory, _Layout(layout_timeout), debug, progress,
                          launch, fit, budgets)
            if schedule:
                from graphtool.commands.shapes import over_schedule

                result = replace(result, shapes=over_schedule(target, ent, device, progress, inference=inference).report)
            if logged is not None:
                from graphtool.analysis.run_log.against import compare, prediction_from

                predicted = prediction_from(str(target), result.trace, result.verdict)
                result = replace(result, beside_run=(logged, compare(logged, predicted)))
            results.append(result)
    return results


class _Layout:
    """Lays out pictures, giving up on one that takes too long and on all when no renderer exists."""

    def __init__(self, timeout: float):
        self.timeout = timeout
        self.notes: list[str] = []
        self.missing = False

    def __call__(self, drawing, name, depth, members, what: str) -> Optional[Level]:
        from graphtool.errors import RendererMissing, UsageError
        from graphtool.render.dot import to_dot
        from graphtool.render.report import layout_svg

        if self.missing:
            return None
        # the page shows a node's facts on click: tooltips (folded boxes get them too) would only add bytes
        drawing = replace(drawing, nodes=tuple(replace(n, tooltip=None) for n in drawing.nodes))
        start = time.perf_counter()
        try:
            svg = layout_svg(to_dot(drawing, legend=False), timeout=self.timeout)
        except RendererMissing:
            self.missing = True
            self.notes.append("no Graphviz layout program was found, so the page has no pictures "
                              "(install Graphviz, or pip install graphviz-pure)")
            return None
        except UsageError as exc:
            why = f"its layout took longer than {self.timeout:g} s (--layout-timeout)" if "took longer" in exc.message else exc.message
            self.notes.append(f"{what}, {name}: not drawn: {why}")
            return None
        return Level(name, depth, svg, len(drawing.nodes), members, time.perf_counter() - start)


def _one(target, ent, device, inference, backend, want_memory, lay_out, debug, progress, launch: Launch,
         fit=None, budgets=None) -> ReportResult:
    from graphtool.analysis.cudagraphs.verdict import cudagraph_verdict
    from graphtool.analysis.devices import device_report
    from graphtool.analysis.findings import NodeIndex, build_findings
    from graphtool.analysis.trace_report import build_trace_report

    with launch.opened(target, ent, progress) as run:
        capture, memory, memory_note, fitted = _own_device(target, run.entry, device, inference, backend, want_memory,
                                                           debug, progress, wrapper=run.session,
                                                           factory_args=run.factory_args, n_steps=launch.own_steps,
                                                           fit=fit, budgets=budgets)
        wrapped = launch.report(run, capture)
    standin, accel, standin_wrapped = launch.standin(target, ent, device, inference, backend, debug=debug,
                                                     progress=progress)
    trace = build_trace_report(capture)
    verdict = cudagraph_verdict(standin, backend=backend if backend != "aot_eager" else "inductor", predicted=accel == "meta")
    wrapped = launch.judged(wrapped, verdict, standin, standin_report=standin_wrapped)
    rank_memory = launch.rank_memory(memory, wrapped, capture)
    devices = device_report(standin, main_device=accel, stand_in="meta stands for cuda:0" if accel == "meta" else None)
    pictures, marks = _pictures(standin, accel, lay_out, progress, devices.show)
    index = NodeIndex({(p.region, p.graph): p.facts for p in pictures})
    findings = build_findings(trace, capture.breaks, verdict, devices, index, marks)
    notes = tuple(n for n in (standin.stopped, *lay_out.notes) if n)
    return ReportResult(target, trace, verdict, devices, memory, memory_note, tuple(pictures), findings, accel, notes,
                        rank_memory=rank_memory, fit=fitted, **launch.fields(wrapped))


def _own_device(target, ent, device, inference, backend, want_memory, debug, progress, wrapper=None, factory_args=(),
                n_steps=1, fit=None, budgets=None):
    """The own-device trace, and the memory report from the same loaded model when asked for (and from them the
    step's fit, with ``fit``/``budgets``)."""
    from graphtool.capture.tracer import trace_model
    from graphtool.commands.fit import recording
    from graphtool.errors import GraphtoolError

    spec = shared.load(target, ent, device, progress, factory_args, wrapped=wrapper is not None)
    eager = None
    note = None if want_memory else "not measured (--no-memory)"
    if want_memory and not inference:
        from graphtool.capture.memory.saved_tensors import capture_saved

        progress.phase("running the forward eagerly, recording what autograd saves...")
        try:
            with shared.quiet_stdout():
                eager = capture_saved(spec)
        except GraphtoolError as exc:
            note = f"not available: {exc.message}"
    elif inference:
        note = "not measured: --inference traces no backward"
    progress.phase(f"tracing with dynamo + {backend}'s AOT stage...")
    with shared.quiet_stdout(), recording(fit, budgets) as joints:
        capture = trace_model(spec, inference=inference, backend=backend, quiet=not debug,
                              on_region=lambda i: progress.phase(f"tracing region {i}..."), wrapper=wrapper,
                              steps=n_steps)
    memory = fitted = None
    if eager is not None:
        from graphtool.analysis.memory.saved import build_memory_report

        memory = build_memory_report(eager, capture)
        if fit is not None or budgets is not None:
            from graphtool.commands.fit import fit_report

            fitted = fit_report(spec, memory, capture, joints, fit, budgets, progress)
    return capture, memory, note, fitted


def _pictures(capture, accel, lay_out, progress, show_device=None) -> tuple[list[Picture], dict]:
    from graphtool.analysis.drawing import fx_drawing, fx_highlights
    from graphtool.analysis.node_facts import graph_facts

    model = capture.spec.model
    from graphtool.capture.user.script import is_module

    classes = {n: type(m).__name__ for n, m in model.named_modules()} if is_module(model) else {}
    pictures, marks = [], {}
    for region in capture.regions:
        for kind, gm in (("forward", region.forward), ("backward", region.backward)):
            if gm is None:
                continue
            highlights = fx_highlights(region, kind)
            marks[(region.index, kind)] = highlights
            drawing = fx_drawing(gm, kind, region, highlights=highlights, classes=classes, main_device=accel)
            levels, default = _levels(drawing, f"region {region.index} {kind}", lay_out, progress)
            if not levels:
                continue
            pictures.append(Picture(region.index, kind, len(gm.graph.nodes), len(drawing.edges), tuple(levels), default,
                                    graph_facts(gm, kind, region, show_device), drawn=len(drawing.nodes)))
    return pictures, marks


def _levels(drawing, what: str, lay_out, progress) -> tuple[list[Level], int]:
    """Every distinct fold level, shallowest first, then every node (when small enough)."""
    from graphtool.analysis.drawing import opening_depth
    from graphtool.analysis.node_facts import fold_level

    deepest = max((len(n.module) for n in drawing.nodes), default=0)
    levels: list[Level] = []
    seen: set[frozenset] = set()
    for depth in range(1, deepest + 1):
        folded, members = fold_level(drawing, depth)
        ids = frozenset(n.id for n in folded.nodes)
        if ids in seen or len(folded.nodes) == len(drawing.nodes) or len(folded.nodes) > FULL_LIMIT:
            continue
        seen.add(ids)
        progress.phase(f"laying out {what}: modules at depth {depth} ({len(folded.nodes)} boxes)...")
        level = lay_out(folded, f"modules at depth {depth}", depth, members, what)
        if level is not None:
            levels.append(level)
    if len(drawing.nodes) <= FULL_LIMIT:
        progress.phase(f"laying out {what}: every node ({len(drawing.nodes)})...")
        level = lay_out(drawing, "every node", None, {}, what)
        if level is not None:
            levels.append(level)
    elif not levels:
        lay_out.notes.append(f"{what}: {len(drawing.nodes)} nodes and no fold by module: too large to draw")
    if not levels:
        return levels, 0
    best = opening_depth(drawing)
    if best is None and levels[-1].depth is None:  # small enough to read whole
        return levels, len(levels) - 1
    best = best or 1
    shallower = [i for i, lv in enumerate(levels) if lv.depth is not None and lv.depth <= best]
    return levels, shallower[-1] if shallower else 0


def default_output(target: str) -> Path:
    return Path(f"{Path(target.split(':')[0]).stem}-report.html")
