"""The CUDA-graph verdict of each graph torch compiles under FSDP2 (``cudagraphs --fsdp2``).

Under ``fully_shard`` per block and ``torch.compile(model)``, dynamo skips the frame that calls a
sharded module (FSDP2's hooks are ``torch._dynamo.disable``'d) and compiles each block's forward as a
frame of its own: identical blocks share one compiled graph (after a recompile on the first block's
input, which needs no grad). Each compiled graph is its own function to cudagraph trees, which record
one CUDA graph per call site on the step's path: a graph that serves three blocks is three recordings,
each replayed every step. FSDP2's all-gathers and reduce-scatters run eagerly in its hooks between
the graphs, outside every CUDA graph. On an H200 (torch 2.11, one NCCL rank, ``mode="reduce-overhead"``,
docs/gpu-results.md) 4 residual blocks gave 2 graphs, 4 functions CUDA-graphed, 9 captures over 5 steps
and 8 replays per step, as graphtool predicts on the meta stand-in.

Example::

    >>> from graphtool.analysis.cudagraphs.verdict import Partition, Verdict
    >>> v = Verdict("inductor", True, True, 1, (), {}, partitions=(Partition(0, "forward", 0, 3, True),))
    >>> [g.to_dict()["cudagraphs"]["cudagraphed"] for g in graph_verdicts(v, None, regions=1)]
    [True]
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Optional

#: the note every ``--fsdp2`` CUDA-graph verdict adds
FSDP2_CG_NOTE = ("each compiled graph is its own CUDA-graphed function, recorded once per call site (each block it "
                 "serves): {replays} per step from {graphs}; the eager collectives between them stay outside every "
                 "CUDA graph")
MISMATCH_NOTE = ("the stand-in run under FSDP2 compiled {standin} graph(s) where the run on the model's own device "
                 "compiled {own}: the CUDA-graph verdict is the stand-in's")

@dataclass(frozen=True)
class Fsdp2Graph:
    """One compiled graph under FSDP2: its region in trace's ``graphs``, how many times the last
    step ran its forward (the blocks it serves), and its CUDA-graph verdict
    (:func:`graphtool.analysis.cudagraphs.ddp.split_verdict`'s shape)."""

    region: int
    runs_per_step: Optional[int]
    cudagraphs: dict

    def to_dict(self) -> dict:
        return {"region": self.region, "runs_per_step": self.runs_per_step, "cudagraphs": self.cudagraphs}


def runs_per_step(capture: Any) -> dict[int, int]:
    """Region -> forward (or inference) calls in the last step of ``capture``'s loop."""
    log = getattr(capture, "steps", None)
    if log is None or not log.calls:
        return {}
    last = max(c.step for c in log.calls)
    out: dict[int, int] = {}
    for c in log.calls:
        if c.step == last and c.graph in ("forward", "inference"):
            out[c.region] = out.get(c.region, 0) + 1
    return out


def graph_verdicts(verdict, capture: Any, *, regions: int) -> tuple[Fsdp2Graph, ...]:
    """Each of ``regions`` compiled graphs with its part of ``verdict`` and its calls per step."""
    from graphtool.analysis.cudagraphs.ddp import split_verdict

    runs = runs_per_step(capture) if capture is not None else {}
    return tuple(Fsdp2Graph(r, runs.get(r), split_verdict(verdict, r)) for r in range(regions))


def with_graph_verdicts(report, verdict, capture: Any, *, standin=None):
    """``report`` (a :class:`~graphtool.analysis.distributed.wrappers.Fsdp2Report`) with each compiled graph's
    verdict (from ``capture``, the stand-in run) and what CUDA graphs do under FSDP2. ``standin``: the
    stand-in's FSDP2 report when ``report`` came from another run (``trace --fsdp2 --cudagraphs``)."""
    count = standin.graph_count if standin is not None else report.graph_count
    graphs = graph_verdicts(verdict, capture, regions=len(capture.regions) if capture is not None else count)
    steady = getattr(verdict, "steady", None)
    replays = steady.graphs_run_last_step if steady is not None else sum(g.runs_per_step or 0 for g in graphs)
    from graphtool.text import count as counted

    notes = list(report.notes) + [FSDP2_CG_NOTE.format(replays=counted(replays, "CUDA graph"),
                                                      graphs=counted(len(graphs), "compiled graph"))]
    if standin is not None and standin.graph_count != report.graph_count:
        notes.append(MISMATCH_NOTE.format(standin=standin.graph_count, own=report.graph_count))
    return replace(report, graphs=graphs, notes=tuple(notes))
