"""The ``graphtool trace`` report: one object per compiled region, plus mutation facts.

``to_dict()`` is the documented JSON schema (``graphtool/schema/report.schema.json``,
``schema_version`` 1); YAML output is the same dict.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

from graphtool.analysis.graph_summary import GraphSummary, summarize_graph
from graphtool.analysis.mutations import MutationReport, analyze_mutations
from graphtool.capture.graph_breaks import BreakRecord

SCHEMA_VERSION = 1


@dataclass(frozen=True)
class RegionReport:
    index: int
    forward: GraphSummary | None
    backward: GraphSummary | None

    def to_dict(self) -> dict:
        return {
            "region": self.index,
            "forward": self.forward.to_dict() if self.forward else None,
            "backward": self.backward.to_dict() if self.backward else None,
        }


@dataclass(frozen=True)
class BreakInfo(BreakRecord):
    """One graph break (the one record every command shows, :class:`~graphtool.capture.graph_breaks.BreakRecord`:
    ``file``/``line`` the user's own line, ``library_*`` torch's place when that is library code the user's line led
    into, ``source_text`` that line when traced, what graphtool diff matches a moved break by), as trace shows it."""

    @classmethod
    def of(cls, record: BreakRecord, **more):
        """``record`` seen as this class (lint's :class:`~graphtool.analysis.lint.Break` adds ``new`` and ``allowed``)."""
        return cls(**{f.name: getattr(record, f.name) for f in fields(BreakRecord)}, **more)

    @property
    def url(self) -> str | None:
        """torch's page for the break's gb id, the link the CLI diagnostics and the notebook show."""
        from graphtool.analysis.diagnostics import GB_URL

        return GB_URL.format(code=self.code) if self.code else None

    @property
    def help(self) -> str:
        """What to do about it, for its cause, as every command says it (:func:`~graphtool.analysis.diagnostics.break_help`)."""
        from graphtool.analysis.diagnostics import break_help, read_line

        source = self.source_text or (read_line(self.file, self.line) if self.file and self.line else None)
        return break_help(self.reason, code=self.code, hint=self.hint, files=(self.library_file, self.file), source=source)

    def to_dict(self) -> dict:
        d = {"file": self.file, "line": self.line, "reason": self.reason, "code": self.code, "hint": self.hint,
             "source_text": self.source_text, "help": self.help}
        if self.library_file:
            d.update(library_file=self.library_file, library_line=self.library_line)
        return d

    def message(self) -> str:
        """The reason, and for a break in library code where torch saw it (as lint says it)."""
        if not self.library_file:
            return self.reason
        from graphtool.display_paths import display_path

        return f"{self.reason} (in {display_path(self.library_file)}:{self.library_line})"


def break_info(b) -> BreakInfo:
    """A captured graph break (:class:`~graphtool.capture.graph_breaks.GraphBreak`) where it points."""
    from graphtool.capture.graph_breaks import placed

    return BreakInfo.of(placed(b))


@dataclass(frozen=True)
class SkippedInfo:
    """A frame dynamo gave up on and runs eagerly: ``file``/``line`` its ``def``, ``break_*`` where it broke."""

    function: str | None
    file: str | None
    line: int | None
    reason: str
    break_file: str | None = None
    break_line: int | None = None

    def to_dict(self) -> dict:
        return {"function": self.function, "file": self.file, "line": self.line, "reason": self.reason,
                "break_file": self.break_file, "break_line": self.break_line}


@dataclass(frozen=True)
class TraceReport:
    graphtool_version: str
    torch_version: str
    path: str
    entry: str
    device: str
    training: bool  # graphtool traced a backward (not ``--inference``, and something requires grad)
    regions: tuple[RegionReport, ...]
    breaks: tuple[BreakInfo, ...]
    mutations: MutationReport
    backend: str = "inductor"  # whose AOT stage made the graphs
    no_graph: str | None = None  # torch.compile captured no graph: the cause
    skipped_frames: tuple[SkippedInfo, ...] = ()
    no_backward: str | None = None  # training, yet no backward graph: why
    module_training: bool | None = None  # the model's own .training flag (JSON "training"); None: a function
    grad_enabled: bool = True  # the grad mode the model was called in
    own_step: dict | None = None  # a step that runs its own backward/optimizer: {"kind", "evidence"} (train_step.OwnStep)
    counters: dict | None = None  # dynamo's counters for the traced call: calls_captured, fallbacks_to_eager (capture.compat)
    coverage: Any = None  # analysis.coverage.Coverage (``trace --coverage``)

    def diagnostics(self, lines=None) -> list:
        """Graph breaks (GT-B001) and skipped frames (GT-B002) as :class:`~graphtool.analysis.diagnostics.Diagnostic`."""
        from graphtool.analysis import diagnostics as dg

        out = [dg.graph_break(b.message(), b.file, b.line, code=b.code, hint=b.hint, lines=lines, col=b.col, end_col=b.end_col,
                              other_file=b.library_file)
               for b in self.breaks]
        out += [dg.skipped_frame(s.function, s.file, s.line, s.reason, break_file=s.break_file, break_line=s.break_line, lines=lines)
                for s in self.skipped_frames]
        return out

    def summary(self) -> str:
        """The one line trace ends with: ``2 compiled regions, 1 graph break, 1 skipped frame, 2 inputs mutated``."""
        from graphtool.text import count

        mutated = len(self.mutations.mutated)
        return ", ".join((count(len(self.regions), "compiled region"), count(len(self.breaks), "graph break"),
                          count(len(self.skipped_frames), "skipped frame"), count(mutated, "input") + " mutated"))

    def to_dict(self) -> dict:
        d = {
            "schema_version": SCHEMA_VERSION,
            "graphtool_version": self.graphtool_version,
            "torch_version": self.torch_version,
            "model": {"path": self.path, "entry": self.entry, "device": self.device, "training": self.module_training,
                      "grad_enabled": self.grad_enabled, "backend": self.backend},
            "no_graph": self.no_graph,
            "no_backward": self.no_backward,
            "own_step": self.own_step,
            "graph_breaks": [b.to_dict() for b in self.breaks],
            "skipped_frames": [f.to_dict() for f in self.skipped_frames],
            "graphs": [r.to_dict() for r in self.regions],
        }
        d.update(self.mutations.to_dict())
        d["calls_captured"] = (self.counters or {}).get("calls_captured")
        d["fallbacks_to_eager"] = (self.counters or {}).get("fallbacks_to_eager")
        d["coverage"] = self.coverage.to_dict() if self.coverage is not None else None
        return d


def dedupe_breaks(breaks) -> tuple[BreakInfo, ...]:
    seen, out = set(), []
    for b in breaks:
        key = (b.file, b.line, b.reason)
        if key not in seen:
            seen.add(key)
            out.append(break_info(b))
    return tuple(out)


def build_trace_report(capture) -> TraceReport:
    """Summarize every region of a :class:`~graphtool.capture.tracer.Capture`."""
    import torch

    from graphtool import __version__

    regions = tuple(
        RegionReport(
            r.index,
            summarize_graph(r.forward, "forward", r) if r.forward is not None else None,
            summarize_graph(r.backward, "backward", r) if r.backward is not None else None,
        )
        for r in capture.regions
    )
    return TraceReport(
        graphtool_version=__version__,
        torch_version=str(torch.__version__),
        path=str(capture.spec.path),
        entry=capture.spec.entry,
        device=capture.device,
        training=capture.training,
        regions=regions,
        breaks=dedupe_breaks(capture.breaks),
        mutations=analyze_mutations(capture),
        backend=capture.backend,
        no_graph=capture.no_graph,
        skipped_frames=tuple(SkippedInfo(f.function, f.file, f.line, f.reason, f.break_file, f.break_line)
                             for f in getattr(capture, "skipped_frames", ())),
        no_backward=getattr(capture, "no_backward", None),
        module_training=getattr(capture, "module_training", None),
        grad_enabled=getattr(capture, "grad_enabled", True),
        own_step=capture.own_step.to_dict() if getattr(capture, "own_step", None) is not None else None,
        counters=getattr(capture, "counters", None),
    )
