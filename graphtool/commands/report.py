"""``graphtool report``: every fact about one model in one self-contained HTML page.

Every fact is the other commands' answer, asked of the same session (the script runs once): the trace on the model's
own device (graph breaks, mutations and aliasing), memory, and on the accelerator stand-in, a meta copy of the same
model, the devices, the CUDA-graph verdict with its steady state (``graphtool cudagraphs``' own) and the pictures,
whose red marks are the nodes a GPU run would trip on.
Each forward and backward graph is drawn at every fold level (one box per module at depth 1, 2...,
and every node when the graph is small enough to lay out quickly); the page switches between them.

Example::

    >>> from graphtool.commands.session import Session
    >>> r = Session("examples/mlp.py").report(memory=False)
    >>> [(p.graph, [lv.name for lv in p.levels]) for p in r.pictures]  # doctest: +ELLIPSIS
    [('forward', [..., 'every node']), ('backward', [..., 'every node'])]
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Optional

from graphtool.commands.result import Result
from graphtool.commands.session import per_model
from graphtool.display_paths import display_path
from graphtool.schema import stamped

if TYPE_CHECKING:
    from graphtool.analysis.cudagraphs.verdict import Verdict
    from graphtool.analysis.devices import DeviceReport
    from graphtool.analysis.memory.fit_report import FitReport
    from graphtool.analysis.memory.rank_memory import RankMemory
    from graphtool.analysis.memory.saved import MemoryReport
    from graphtool.analysis.shapes import ShapeReport
    from graphtool.analysis.trace_report import TraceReport
    from graphtool.commands.launch import Part
    from graphtool.render.pictures import Picture


@dataclass(frozen=True, repr=False)
class ReportResult(Result):
    """Every fact about one model, and its page: :meth:`html` is the whole ``graphtool report`` page,
    ``command`` the line it says made it."""

    command = "report"

    target: str
    trace: TraceReport  # graphtool trace's (own device)
    verdict: Verdict  # graphtool cudagraphs' (stand-in, its steady state)
    devices: DeviceReport  # graphtool devices' (stand-in)
    memory: Optional[MemoryReport]  # graphtool memory's
    memory_note: Optional[str]  # why memory is missing, when it is
    pictures: tuple[Picture, ...]
    findings: tuple  # analysis.findings.Finding
    stand_in: str  # "meta" or the GPU the stand-in trace ran on
    notes: tuple[str, ...] = ()
    wrapped: Optional[Part] = None  # what DDP or FSDP2 did: the split or block graphs, each with its CUDA-graph verdict
    rank_memory: Optional[RankMemory] = None  # ``--fsdp2`` with memory: each rank's bytes, activations included
    fit: Optional[FitReport] = None  # ``--fit``/``--budgets``: the step's predicted peak and its timeline
    shapes: Optional[ShapeReport] = None  # ``--schedule``: the loop over the script's get_input_schedule()
    made_by: str = ""  # the command that makes this report again, as the page says it
    beside_run: Optional[tuple] = None  # (RunLog, Comparison) with ``--log``: a real run's logs beside this prediction
    compile_time: Optional[object] = None  # ``--compile``: graphtool compile's CompileReport for the same script

    def summary(self) -> str:
        t = self.trace
        regions = len(t.regions)
        breaks = len(t.breaks)
        parts = [f"{regions} compiled region{'s' if regions != 1 else ''}", f"{breaks} graph break{'s' if breaks != 1 else ''}",
                 t.mutations.verdict()]
        if self.devices is not None:
            parts.append(self.devices.verdict())
        if self.verdict is not None:
            steady = getattr(self.verdict, "steady", None)
            parts.append(self.verdict.summary() + (f"; steady state {steady.summary()}" if steady else ""))
        if self.memory is not None:
            parts.append(self.memory.verdict())
        return "; ".join(parts + self._wrapped("summary"))

    def to_dict(self) -> dict:
        """The trace's document (``graphtool trace --format json`` of the own-device trace)."""
        return stamped("trace", self.trace.to_dict())  # the trace's document, as graphtool trace prints it

    def view(self):
        from rich.text import Text

        return Text(self.summary(), style="verdict")

    @functools.cached_property
    def page(self) -> str:
        """The page: each part's section as its own command's view shows it, in the page's order."""
        from graphtool.render import report as page

        t, made = self.trace, versions()
        sections = [page.findings_section(self.findings), page.graphs_section(self.pictures, t, self.devices, self.stand_in),
                    page.mutations_section(t.mutations), page.devices_section(self.devices),
                    page.cudagraphs_section(self.verdict), *self._wrapped("section", self.rank_memory),
                    page.memory_section(self.memory, self.memory_note),
                    *([page.fit_section(self.fit)] if self.fit is not None else []),
                    *([page.shapes_section(self.shapes)] if self.shapes is not None else []),
                    *([page.beside_run_section(self.beside_run)] if self.beside_run is not None else []),
                    *([_compile_section(self.compile_time)] if self.compile_time is not None else []),
                    page.regions_section(t, self.devices), page.model_section(t, self.stand_in, self.made_by, made)]
        mode = "training" if t.training else "inference"
        line = f"{t.device}, {mode}, backend {t.backend}; torch {made.get('torch', '?')}; made by: {self.made_by}"
        return page.format_report(sections, self.pictures, title=display_path(t.path) or t.path, summary=self.summary(),
                                  subtitle=line, notes=self.notes)

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


def _compile_section(compiled) -> str:
    from graphtool.render.compile import compile_section

    return compile_section(compiled)


def versions() -> dict:
    """What made the page: graphtool's, torch's and Python's versions."""
    import torch

    from graphtool import __version__
    from graphtool.render.report import python_version

    return {"graphtool": __version__, "torch": str(torch.__version__), "python": python_version()}


report = per_model("report")


def run(session, *, output, memory: bool, layout_timeout: float, fit: Optional[str],
        budgets: Optional[str], schedule: bool, log: Optional[list], compile: bool = False) -> ReportResult:
    """Every fact about the model in one :class:`ReportResult`, its pictures laid out (SVG), the page written to
    ``output`` when given; a picture whose layout takes longer than ``layout_timeout`` seconds is left out, and the page
    says so. Under the session's launch (``--ddp``, ``--fsdp2``) both traces run under the wrapper, and the page has its
    section. ``memory``: what training saves (``fit``/``budgets``: and a "Will it fit" section, as ``memory --fit``);
    ``schedule``: a section with the loop over the script's ``get_input_schedule()`` (``graphtool shapes``'); ``log`` (a
    TORCH_TRACE folder or files of a real run of the same script): a section with each fact of the run beside graphtool's
    prediction (``graphtool log --against``); ``compile``: a "Compile time" section, ``graphtool compile``'s answer asked
    of the same session (a real compile in fresh processes, the script's path: not a model object)."""
    from graphtool.capture.user.deadline import check_timeout
    from graphtool.commands.fit import check_fit
    from graphtool.errors import UsageError

    check_fit(fit, budgets, launch=session.launch)
    if (fit is not None or budgets is not None) and (not memory or session.inference):
        flag = "--no-memory" if not memory else "--inference"
        raise UsageError(f"--fit/--budgets with {flag}: the step's peak needs the memory of a training step",
                         hint=f"drop {flag}")
    check_timeout(layout_timeout, "--layout-timeout")
    session.launch.check("report", schedule=schedule)
    if compile and (session.is_object or session.device == "meta"):  # before any trace: the compile runs a script
        raise UsageError("--compile compiles a model script for real in fresh processes: "
                         + ("a model object cannot be handed to them" if session.is_object else "--device meta has no data"),
                         hint="graphtool report model.py --compile (on cpu or cuda)")
    logged = None
    if log:  # read first: a wrong path costs no trace
        from graphtool.analysis.run_log import read_logs

        session.progress.phase("reading the run's logs...")
        logged = read_logs(log)
    if not session.is_object:  # a wrapper changes the model in place: the memory's own launch gets a copy
        session.loads.want_plain = True
    from graphtool.render.pictures import Layout

    result = _one(session, memory, Layout(layout_timeout, flag="--layout-timeout"), fit, budgets)
    if schedule:
        result = replace(result, shapes=session.shapes(advise=False).report)
    if logged is not None:
        from graphtool.analysis.run_log.against import compare, prediction_from

        predicted = prediction_from(str(session.target), result.trace, result.verdict)
        result = replace(result, beside_run=(logged, compare(logged, predicted)))
    if compile:  # a compile whose child could not run is a note on the page, as memory's is
        from graphtool.errors import GraphtoolError

        try:
            result = replace(result, compile_time=session.compile().report)
        except GraphtoolError as exc:
            result = replace(result, notes=(*result.notes, f"Compile time not measured: {exc.message}"))
    if output is not None:
        result.save(output)
    return result


def _one(session, want_memory, lay_out, fit=None, budgets=None) -> ReportResult:
    from graphtool.analysis.findings import NodeIndex, build_findings
    from graphtool.analysis.trace_report import build_trace_report
    from graphtool.errors import GraphtoolError
    from graphtool.render.pictures import fx_pictures

    launch = session.launch
    # the stand-in's first: the verdict, the devices and the pictures (laid out, their facts taken), as cudagraphs and
    # devices give them; a one-question session then forgets its graphs before the own-device trace is made (issue 49:
    # a 5,502-module model's report peaked in the second trace, on the first one's leftovers)
    verdict, judged, _accel, standin_wrapped = session.verdict(session.backend if session.backend != "aot_eager" else "inductor")
    devices = session.devices().report
    standin, accel, _ = session.first_step()
    pictures, marks = fx_pictures(standin, accel, lay_out, session.progress, devices.show)
    stopped, judge = standin.stopped, None
    if launch.wrapped:  # a wrapper's graphs are judged on the stand-in's, after the own trace says what it did
        judge = functools.partial(launch.judged, verdict=verdict, standin_capture=judged, standin_report=standin_wrapped)
    else:
        session.done_with("standin", "verdict")
    del standin, judged
    capture, wrapped, _ = session.own_trace()
    memory = fitted = None
    note = "not measured (--no-memory)" if not want_memory else "not measured: --inference traces no backward"
    if want_memory and not session.inference:
        try:
            measured = session.memory(fit=fit, budgets=budgets)
            memory, fitted, note = measured.report, measured.fit, None
        except GraphtoolError as exc:
            note = f"not available: {exc.message}"
    trace, breaks, entry = build_trace_report(capture), capture.breaks, capture.spec.entry
    rank_memory = launch.rank_memory(memory, wrapped, capture)
    del capture
    session.done_with("own")
    wrapped = judge(wrapped) if judge is not None else wrapped
    index = NodeIndex({(p.region, p.graph): p.facts for p in pictures})
    findings = build_findings(trace, breaks, verdict, devices, index, marks)
    notes = tuple(n for n in (stopped, *lay_out.notes) if n)
    return ReportResult(session.target if isinstance(session.target, str) else entry, trace, verdict,
                        devices, memory, note, tuple(pictures), findings, accel, notes, wrapped=launch.part(wrapped),
                        rank_memory=rank_memory, fit=fitted,
                        made_by=f"graphtool.load({session.name!r}).report()")


def default_output(target: str) -> Path:
    return Path(f"{Path(target.split(':')[0]).stem}-report.html")
