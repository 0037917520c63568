"""The ``graphtool trace`` report: one object per compiled region, plus mutation facts.

``to_dict()`` is the documented JSON schema (``graphtool/schema/report.schema.json``,
``schema_version`` 1); YAML output is the same dict.
"""

from __future__ import annotations

from dataclasses import dataclass

from graphtool.analysis.graph_summary import GraphSummary, summarize_graph
from graphtool.analysis.mutations import MutationReport, analyze_mutations

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
class BreakInfo:
    file: str | None
    line: int | None
    reason: str

    def to_dict(self) -> dict:
        return {"file": self.file, "line": self.line, "reason": self.reason}


@dataclass(frozen=True)
class TraceReport:
    graphtool_version: str
    torch_version: str
    path: str
    entry: str
    device: str
    training: bool
    regions: tuple[RegionReport, ...]
    breaks: tuple[BreakInfo, ...]
    mutations: MutationReport
    backend: str = "inductor"  # whose AOT stage made the graphs
    no_graph: str | None = None  # torch.compile captured no graph: the cause

    def to_dict(self) -> dict:
        d = {
            "schema_version": SCHEMA_VERSION,
            "graphtool_version": self.graphtool_version,
            "torch_version": self.torch_version,
            "model": {"path": self.path, "entry": self.entry, "device": self.device, "training": self.training,
                      "backend": self.backend},
            "no_graph": self.no_graph,
            "graph_breaks": [b.to_dict() for b in self.breaks],
            "graphs": [r.to_dict() for r in self.regions],
        }
        d.update(self.mutations.to_dict())
        return d


def dedupe_breaks(breaks) -> tuple[BreakInfo, ...]:
    seen, out = set(), []
    for b in breaks:
        key = (b.file, b.line, b.reason)
        if key not in seen:
            seen.add(key)
            out.append(BreakInfo(b.file, b.line, b.reason))
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
    )
