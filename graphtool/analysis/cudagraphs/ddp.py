"""The CUDA-graph verdict of each graph DDP's optimizer splits off (``cudagraphs --ddp``), and the
parameters no step gives a gradient (DDP fails on the second step without ``find_unused_parameters``).

Under ``DDP(torch.compile(model))`` each split graph is a compiled function of its own, so cudagraph
trees (``mode="reduce-overhead"``) or ``backend="cudagraphs"`` judge and record each one apart: the
verdict's regions are the split graphs, and this attaches each region's part of the verdict to the
DDP report's graph. DDP's allreduce runs in the reducer's autograd hooks between the backward
graphs, outside every CUDA graph, so no collective is captured.

Example::

    >>> from graphtool.analysis.cudagraphs.verdict import Partition, Verdict
    >>> from graphtool.analysis.distributed.wrappers import DdpReport, SplitGraph
    >>> g = SplitGraph(0, 0, 0, ("fc.weight",), 4, None, None)
    >>> ddp = DdpReport("DDP(torch.compile(model))", 2, 25.0, 1.0, (g,), (), 1, (), ())
    >>> v = Verdict("inductor", True, True, 1, (), {}, partitions=(Partition(0, "forward", 0, 3, True),))
    >>> with_split_verdicts(ddp, v).graphs[0].cudagraphs["cudagraphed"]
    True
"""

from __future__ import annotations

from dataclasses import replace

from graphtool.text import count

#: the note every ``--ddp`` CUDA-graph verdict adds
SPLIT_NOTE = ("each split graph is its own compiled function: CUDA graphs judge and record each one apart "
              "({graphs}, each with its forward and backward), and DDP's allreduce runs between the "
              "backward graphs in the reducer's hooks, outside every CUDA graph")
MISMATCH_NOTE = ("the stand-in run under DDP split {standin} graph(s) where the run on the model's own device "
                 "split {own}: the CUDA-graph verdict is the stand-in's")


def split_verdict(verdict, region: int) -> dict:
    """One region's part of ``verdict``: whether every one of its pieces is CUDA-graphed, the
    reasons that skip it, and its partitions (all of them, and those CUDA-graphed)."""
    parts = [p for p in verdict.partitions if p.region == region]
    skips = [r for r in verdict.reasons if r.region == region and r.skips]
    graphs = {}
    for p in parts:
        graphs[p.graph] = graphs.get(p.graph, True) and p.cudagraphed
    return {
        "cudagraphed": bool(parts) and not skips and all(p.cudagraphed for p in parts),
        "graphs": graphs,  # forward/backward/inference -> every piece CUDA-graphed
        "partitions": len(parts),
        "partitions_cudagraphed": sum(p.cudagraphed for p in parts),
        "skips": [{"code": r.code, "cg": r.cg, "graph": r.graph} for r in skips],
    }


def with_split_verdicts(report, verdict, *, standin=None):
    """``report`` (a :class:`~graphtool.analysis.distributed.wrappers.DdpReport`) with each graph's verdict
    and the note on what CUDA graphs do under DDP. ``standin``: the stand-in's DDP report when the
    verdict came from another run than ``report``'s (``trace --ddp --cudagraphs``)."""
    graphs = tuple(replace(g, cudagraphs=split_verdict(verdict, g.region)) for g in report.graphs)
    notes = list(report.notes) + [SPLIT_NOTE.format(graphs=count(len(graphs), "split graph"))]
    if standin is not None and standin.graph_count != report.graph_count:
        notes.append(MISMATCH_NOTE.format(standin=standin.graph_count, own=report.graph_count))
    return replace(report, graphs=graphs, notes=tuple(notes))


#: what to do about parameters that get no gradient under DDP
UNUSED_FIX = ("use every parameter in forward (or set requires_grad=False on those it never uses), or wrap as "
              "DDP(model, find_unused_parameters=True), which costs a walk of the autograd graph every step")


def unused_parameters(capture, run) -> dict | None:
    """``run``'s parameters that require grad and got no gradient (a
    :class:`~graphtool.capture.distributed.ddp.DdpRun`), where the first is set in the user's code, and
    the step the loop failed at (torch's error) when ``find_unused_parameters`` is off; None when every
    parameter got one."""
    names = list(getattr(run, "unused_params", ()) or ())
    if not names:
        return None
    log = getattr(capture, "steps", None)
    failed = getattr(log, "failed", None)
    step = int(failed.split()[1]) if failed and failed.startswith("step ") and failed.split()[1].isdigit() else None
    where = _defined_at(capture.spec, names[0])
    return {
        "parameters": names,
        "find_unused_parameters": bool(run.find_unused_parameters),
        "fails_at_step": step,
        "error": failed,
        "source": where,
        "fix": UNUSED_FIX,
    }


def _defined_at(spec, name: str) -> dict | None:
    """Where the module holding parameter ``name`` is set (``self.unused = ...``) in the model's
    class, else that class's first line."""
    import inspect
    import re

    model = spec.model
    parts = name.split(".")
    owner = model
    for part in parts[:-2]:
        owner = getattr(owner, part, None)
    attr = parts[-2] if len(parts) >= 2 else parts[-1]
    cls = type(owner) if owner is not None else type(model)
    try:
        lines, first = inspect.getsourcelines(cls)
        file = inspect.getsourcefile(cls)
    except (OSError, TypeError):
        return None
    pattern = re.compile(rf"self\.{re.escape(attr)}\s*[:=]")
    for offset, text in enumerate(lines):
        if pattern.search(text):
            return {"file": file, "line": first + offset}
    return {"file": file, "line": first}
