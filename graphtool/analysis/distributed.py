"""What DDP does to the compiled graphs, as plain values: one entry per graph torch compiles.

Example::

    >>> from graphtool.capture.distributed import DdpSession
    >>> from graphtool.capture.script import load_model
    >>> from graphtool.capture.tracer import trace_model
    >>> with DdpSession(world_size=8, bucket_cap_mb=25) as ddp:
    ...     cap = trace_model(load_model("examples/mlp.py"), wrapper=ddp)
    ...     report = build_ddp_report(cap, ddp.result(cap))
    >>> report.to_dict()["graph_count"]
    1
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

from graphtool.analysis.graph_summary import Source, user_source

_MB = 1024 * 1024

#: what every DDP report says about gradients' allreduce (it is not in any graph)
ALLREDUCE_NOTE = ("DDP's gradient allreduce runs in its reducer's autograd hooks, one per bucket, outside "
                  "every compiled graph; the graphs hold no collective")
COMPILED_DDP_NOTE = ("the script's get_distributed_model returned DDP(model): traced as {wrapper}, which compiled "
                     "{graphs} graph(s) and split none (DDPOptimizer splits only DDP(torch.compile(model))); "
                     "the graph breaks say where dynamo stopped")
WORLD_SIZE_NOTE = ("the splits do not depend on the world size (DDPOptimizer counts parameter bytes against "
                   "bucket_cap_mb)")


@dataclass(frozen=True)
class SplitGraph:
    """One graph torch compiles under DDP: its region in trace's ``graphs``, the dynamo graph it was
    cut from, its bucket's parameters and bytes, and where the split falls."""

    region: int
    dynamo_graph: int
    bucket: int
    params: tuple[str, ...]
    bytes: int
    module: Optional[str]
    source: Optional[Source]

    def to_dict(self) -> dict:
        return {"region": self.region, "dynamo_graph": self.dynamo_graph, "bucket": self.bucket,
                "params": list(self.params), "bytes": self.bytes, "module": self.module,
                "source": self.source.to_dict() if self.source else None}


@dataclass(frozen=True)
class Collective:
    """A collective inside a compiled graph (FSDP2's all-gathers, functional collectives)."""

    region: int
    graph: str  # "forward" or "backward"
    op: str
    group: Optional[str]
    bytes: Optional[int]

    def to_dict(self) -> dict:
        return {"region": self.region, "graph": self.graph, "op": self.op, "group": self.group, "bytes": self.bytes}


@dataclass(frozen=True)
class DdpReport:
    wrapper: str
    world_size: int
    bucket_cap_mb: float
    first_bucket_mb: float
    graphs: tuple[SplitGraph, ...]
    graphs_at: tuple[tuple[float, int], ...]  # (bucket_cap_mb, graphs torch would compile)
    dynamo_graphs: int
    collectives: tuple[Collective, ...]
    notes: tuple[str, ...]
    ranks: Any = None  # RanksReport (graphtool.analysis.ranks): which ranks compile which graphs

    @property
    def graph_count(self) -> int:
        return len(self.graphs)

    def to_dict(self) -> dict:
        return {
            "wrapper": self.wrapper,
            "world_size": self.world_size,
            "bucket_cap_mb": self.bucket_cap_mb,
            "first_bucket_mb": self.first_bucket_mb,
            "dynamo_graphs": self.dynamo_graphs,
            "graph_count": self.graph_count,
            "graphs": [g.to_dict() for g in self.graphs],
            "graphs_at_bucket_cap_mb": [{"bucket_cap_mb": cap, "graphs": n} for cap, n in self.graphs_at],
            "collectives": [c.to_dict() for c in self.collectives],
            "notes": list(self.notes),
            **({"ranks": self.ranks.to_dict()} if self.ranks is not None else {}),
        }


def build_ddp_report(capture: Any, run: Any) -> DdpReport:
    """``run`` (a :class:`~graphtool.capture.distributed.DdpRun`) matched to ``capture``'s regions."""
    graphs = []
    for frame_index, frame in enumerate(run.frames):
        for b in frame.buckets:
            graphs.append(SplitGraph(frame.first_region + b.index, frame_index, b.index, b.params, b.bytes, b.module,
                                     user_source(b.stack_trace)))
    totals: dict[float, int] = {}
    for frame in run.frames:
        for cap, n in frame.graphs_at:
            totals[cap] = totals.get(cap, 0) + n
    collectives = tuple(collectives_in(capture))
    notes = [WORLD_SIZE_NOTE]
    if not collectives:
        notes.insert(0, ALLREDUCE_NOTE)
    if run.wrapper != "DDP(torch.compile(model))":
        notes.insert(0, COMPILED_DDP_NOTE.format(wrapper=run.wrapper, graphs=len(capture.regions)))
    return DdpReport(run.wrapper, run.world_size, run.bucket_cap_mb, run.first_bucket_bytes / _MB, tuple(graphs),
                     tuple(sorted(totals.items())), len(run.frames), collectives, tuple(notes))


def collectives_in(capture: Any):
    """Every c10d collective in the regions' forward and backward graphs."""
    for region in capture.regions:
        for kind, gm in (("forward", region.forward), ("backward", region.backward)):
            if gm is None:
                continue
            for node in gm.graph.nodes:
                name = str(node.target) if node.op == "call_function" else ""
                if "c10d" not in name or "wait_tensor" in name:
                    continue
                group = next((a for a in reversed(node.args) if isinstance(a, str)), None)
                yield Collective(region.index, kind, name, group, _bytes(node.meta.get("val")))


def _bytes(val: Any) -> Optional[int]:
    try:
        return int(val.numel() * val.element_size())
    except (AttributeError, TypeError, RuntimeError):
        return None
