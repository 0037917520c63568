"""What DDP does to the compiled graphs, as plain values: one entry per graph torch compiles.

Example::

    >>> from graphtool.capture.distributed.ddp import DdpSession
    >>> from graphtool.capture.user.script import load_model
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
COMPILED_DDP_NOTE = ("the script's get_distributed_model returned DDP(model): traced as {wrapper}; dynamo skips "
                     "DDP's own forward (the graph breaks say where) and compiles the wrapped module's forward as a "
                     "frame of its own, {what}")
#: how the frame under torch.compile(DDP(model)) fared: split as DDP(torch.compile(model)) would be, or not compiled
COMPILED_DDP_SPLIT = "which DDPOptimizer splits by bucket as under DDP(torch.compile(model)): {graphs} graph(s)"
COMPILED_DDP_NONE = ("but a forward of torch's own (nn.Sequential, a bare layer) is not a frame dynamo compiles: no "
                     "graph; a forward of your own is compiled and split")
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
    cudagraphs: Optional[dict] = None  # this graph's CUDA-graph verdict (``--cudagraphs``; analysis.cudagraphs.ddp)

    def to_dict(self) -> dict:
        return {"region": self.region, "dynamo_graph": self.dynamo_graph, "bucket": self.bucket,
                "params": list(self.params), "bytes": self.bytes, "module": self.module,
                "source": self.source.to_dict() if self.source else None,
                **({"cudagraphs": self.cudagraphs} if self.cudagraphs is not None else {})}


@dataclass(frozen=True)
class Collective:
    """A collective inside a compiled graph (FSDP2's all-gathers, functional collectives)."""

    region: int
    graph: str  # "forward" or "backward"
    op: str
    group: Optional[str]
    bytes: Optional[int]
    group_size: Optional[int] = None  # the group's ranks (None: the group was gone, or torch keeps no table)

    def to_dict(self) -> dict:
        return {"region": self.region, "graph": self.graph, "op": self.op, "group": self.group,
                "group_size": self.group_size, "bytes": self.bytes}


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
    unused: Optional[dict] = None  # parameters no step gave a gradient (analysis.cudagraphs.ddp.unused_parameters)
    ranks: Any = None  # RanksReport (graphtool.analysis.distributed.ranks): which ranks compile which graphs

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
            **({"unused_parameters": self.unused} if self.unused is not None else {}),
            **({"ranks": self.ranks.to_dict()} if self.ranks is not None else {}),
        }


def build_ddp_report(capture: Any, run: Any) -> DdpReport:
    """``run`` (a :class:`~graphtool.capture.distributed.ddp.DdpRun`) matched to ``capture``'s regions."""
    graphs = []
    for frame_index, frame in enumerate(run.frames):
        for b in frame.buckets:
            graphs.append(SplitGraph(frame.first_region + b.index, frame_index, b.index, b.params, b.bytes, b.module,
                                     user_source(b.stack_trace)))
    totals: dict[float, int] = {}
    for frame in run.frames:
        for cap, n in frame.graphs_at:
            totals[cap] = totals.get(cap, 0) + n
    collectives = tuple(collectives_in(capture, getattr(run, "group_sizes", None)))
    notes = [WORLD_SIZE_NOTE]
    if not collectives:
        notes.insert(0, ALLREDUCE_NOTE)
    if run.wrapper != "DDP(torch.compile(model))":
        what = (COMPILED_DDP_SPLIT.format(graphs=len(graphs)) if graphs else
                COMPILED_DDP_NONE if not capture.regions else f"{len(capture.regions)} graph(s)")
        notes.insert(0, COMPILED_DDP_NOTE.format(wrapper=run.wrapper, what=what))
    from graphtool.analysis.cudagraphs.ddp import unused_parameters

    return DdpReport(run.wrapper, run.world_size, run.bucket_cap_mb, run.first_bucket_bytes / _MB, tuple(graphs),
                     tuple(sorted(totals.items())), len(run.frames), collectives, tuple(notes),
                     unused_parameters(capture, run))


def collectives_in(capture: Any, group_sizes: Optional[dict] = None):
    """Every c10d collective in the regions' forward and backward graphs; ``group_sizes`` (group name ->
    ranks, :func:`graphtool.capture.compat.process_group_sizes` taken while the group lived) gives each
    one's group size."""
    for region in capture.regions:
        for kind, gm in (("forward", region.forward), ("backward", region.backward)):
            if gm is None:
                continue
            for node in gm.graph.nodes:
                name = str(node.target) if node.op == "call_function" else ""
                if "c10d" not in name or "wait_tensor" in name:
                    continue
                group = next((a for a in reversed(node.args) if isinstance(a, str)), None)
                yield Collective(region.index, kind, name, group, _bytes(node.meta.get("val")),
                                 (group_sizes or {}).get(group))


def _bytes(val: Any) -> Optional[int]:
    try:
        return int(val.numel() * val.element_size())
    except (AttributeError, TypeError, RuntimeError):
        return None


# --- FSDP2 (``--fsdp2``) ---------------------------------------------------------------------------

#: facts graphtool cannot compare with a real run on CPU, named in every FSDP2 report
PREDICTED_ONLY = (
    "the all-gather peak: the unsharded parameters held at once (checked against gloo) plus the next block's "
    "all-gather output in flight while one runs (FSDP2's prefetch, which a CPU cannot measure); measured on an "
    "H200 (torch 2.11, fake group of 8) for tests/fixtures/fsdp2/blocks.py only: 264,704 bytes held as the first "
    "block runs, graphtool's 263,712 rounded up to the caching allocator's 512-byte blocks",
    "the CUDA-graph verdict (cudagraphs --fsdp2): torch's checks run on the meta stand-in; measured on an H200 "
    "(torch 2.11, one NCCL rank, reduce-overhead) for one model only, 4 residual blocks with fully_shard per block "
    "and root: 2 graphs, 4 functions CUDA-graphed, 9 captures over 5 steps, 8 replays per step, no skip, as "
    "graphtool predicts; other models, and world sizes above 1, are predicted only",
)
EAGER_NOTE = ("FSDP2's all-gathers and reduce-scatters run in its hooks, eagerly, between the compiled graphs; "
              "the graphs hold none")
TRACEABLE_NOTE = ("torch._dynamo.config.skip_fsdp_hooks is False: FSDP2's hooks are traced, so its collectives can "
                  "sit inside the graphs (listed per graph above)")
NO_COLLECTIVE_GRAPHS = ("no compiled graph holds a collective: as far as FSDP2 goes, each may become a CUDA graph; "
                        "the eager collectives between them stay outside")
HAS_COLLECTIVE_GRAPHS = ("{n} compiled graph(s) hold a collective: captured in a CUDA graph, the collective replays "
                         "with the buffers recorded at capture, so every rank must replay the same graphs in the "
                         "same order")
UNEVEN_NOTE = ("{n} parameter(s) do not split evenly over {ws} ranks (first: {first}): FSDP2 pads their dim 0, so "
               "ranks hold shards of different sizes but allocate the same padded bytes")
SKIPPED_ROOT_NOTE = ("FSDP2's hooks are torch._dynamo.disable'd: dynamo skips the frame that calls a fully_shard'ed "
                     "module (the root's forward runs eagerly) and compiles each block's forward as a frame of its own")
SCRIPT_COMPILED_NOTE = ("the script compiled {n} module(s) itself (module.compile(), first: {first}): their graphs "
                        "are among those counted, recorded with graphtool's backend instead of the script's")
SAME_GRAPHS_NOTE = ("every rank compiles the same graphs: they see the unsharded parameters, which FSDP2 all-gathers "
                    "to the same shapes on every rank")


@dataclass(frozen=True)
class FsdpUnit:
    """One ``fully_shard``ed module: its parameters, their full bytes and one rank's padded shard
    (what every rank allocates), and the unsharded bytes its all-gather makes while it runs."""

    module: str  # "" for the root
    params: int
    full_bytes: int
    shard_bytes: int  # per rank, padding included
    allgather_bytes: int  # unsharded, padding included: shard_bytes * world_size

    def to_dict(self) -> dict:
        return {"module": self.module, "params": self.params, "full_bytes": self.full_bytes,
                "shard_bytes": self.shard_bytes, "allgather_bytes": self.allgather_bytes}


@dataclass(frozen=True)
class UnitCollectives:
    """The collectives FSDP2 ran eagerly for one unit in one training step, on each rank."""

    unit: str
    op: str  # "all_gather", "reduce_scatter", "all_reduce"
    count: int
    sent_bytes: int  # per call, this rank's input
    received_bytes: int  # per call, this rank's output

    def to_dict(self) -> dict:
        return {"unit": self.unit, "op": self.op, "count": self.count, "sent_bytes": self.sent_bytes,
                "received_bytes": self.received_bytes}


@dataclass(frozen=True)
class Fsdp2RankMemory:
    """What one rank holds under FSDP2, in bytes: its parameter shards (``params``: padding
    included, as FSDP2 allocates them; ``params_unpadded``: the rows the rank owns), its gradient
    shards (the unpadded rows, as ``p.grad.to_local()``), the optimizer's state (None without
    ``get_optimizer``), the unsharded parameters FSDP2 holds at once (``unsharded_peak``: the root's,
    which stay gathered all step, and the largest block's) and, predicted only, the all-gather
    buffers at the peak (``allgather_peak``: that, plus the next block's all-gather output, in
    flight while the current block runs).

    >>> m = Fsdp2RankMemory(rank=0, params=1024, params_unpadded=1000, grads=1000, optimizer=2004,
    ...                unsharded_peak=4096, allgather_peak=8192)
    >>> m.total
    12220
    """

    rank: int
    params: int
    params_unpadded: int
    grads: int
    optimizer: Optional[int]
    unsharded_peak: int
    allgather_peak: int

    @property
    def total(self) -> int:
        return self.params + self.grads + (self.optimizer or 0) + self.allgather_peak

    def to_dict(self) -> dict:
        return {"rank": self.rank, "params": self.params, "params_unpadded": self.params_unpadded, "grads": self.grads,
                "optimizer": self.optimizer, "unsharded_peak": self.unsharded_peak,
                "allgather_peak": self.allgather_peak, "total": self.total}


@dataclass(frozen=True)
class FsdpBreak:
    """A graph break or skipped frame under FSDP2: torch's reason, where torch stopped, the user's line."""

    reason: str
    skips_frame: bool
    torch_source: Optional[Source]
    user_source: Optional[Source]

    def to_dict(self) -> dict:
        return {"reason": self.reason, "skips_frame": self.skips_frame,
                "torch_source": self.torch_source.to_dict() if self.torch_source else None,
                "user_source": self.user_source.to_dict() if self.user_source else None}


@dataclass(frozen=True)
class Fsdp2Report:
    wrapper: str
    world_size: int
    units: tuple[FsdpUnit, ...]
    graph_count: int
    breaks: tuple[FsdpBreak, ...]
    collectives: tuple[Collective, ...]  # inside compiled graphs
    eager: tuple[UnitCollectives, ...]
    same_graphs_on_every_rank: bool
    optimizer: Optional[str]
    memory: tuple[Fsdp2RankMemory, ...]
    predicted_only: tuple[str, ...]
    notes: tuple[str, ...]
    graphs: Optional[tuple] = None  # each compiled graph's CUDA-graph verdict (analysis.cudagraphs.fsdp2.Fsdp2Graph)

    def to_dict(self) -> dict:
        return {
            "wrapper": self.wrapper, "world_size": self.world_size,
            "units": [u.to_dict() for u in self.units],
            "graph_count": self.graph_count,
            "graph_breaks": [b.to_dict() for b in self.breaks],
            "collectives_in_graphs": [c.to_dict() for c in self.collectives],
            "eager_collectives": [c.to_dict() for c in self.eager],
            "same_graphs_on_every_rank": self.same_graphs_on_every_rank,
            "optimizer": self.optimizer,
            "memory": [m.to_dict() for m in self.memory],
            "predicted_only": list(self.predicted_only),
            "notes": list(self.notes),
            **({"graphs": [g.to_dict() for g in self.graphs]} if self.graphs is not None else {}),
        }


def shard_rows(dim0: int, chunk: int, rank: int) -> int:
    """The rows of a dim-0 size ``dim0`` that rank ``rank`` owns when FSDP2 cuts ``chunk`` rows per rank.

    >>> [shard_rows(250, 63, r) for r in range(4)]
    [63, 63, 63, 61]
    """
    return max(0, min(chunk, dim0 - rank * chunk))


def _numel(shape) -> int:
    n = 1
    for d in shape:
        n *= d
    return n


def local_bytes(param: Any, rank: int) -> int:
    """Bytes of the rows of ``param`` (a :class:`~graphtool.capture.distributed.fsdp2.ShardedParam`) that ``rank`` owns."""
    if not param.shape:
        return param.element_size if rank == 0 else 0
    rows = shard_rows(param.shape[0], param.padded_shard[0], rank)
    return rows * _numel(param.shape[1:]) * param.element_size


def fsdp2_rank_memory(run: Any, *, training: bool = True) -> tuple[Fsdp2RankMemory, ...]:
    """Each rank's :class:`Fsdp2RankMemory` from rank 0's run (a :class:`~graphtool.capture.distributed.fsdp2.Fsdp2Run`):
    the other ranks' shards follow FSDP2's row split; an optimizer state tensor shaped like rank 0's
    shard scales with the rank's rows, any other (Adam's ``step``) is the same on every rank. Without
    ``training`` (``--inference``) there are no gradients and no optimizer step."""
    params = [p for u in run.units for p in u.params]
    by_name = {p.name: p for p in params}
    padded = sum(_numel(p.padded_shard) * p.element_size for p in params)
    gathers = [(u.module, sum(_numel(p.padded_shard) * p.element_size for p in u.params) * run.world_size)
               for u in run.units]
    root = sum(b for m, b in gathers if m == "")
    blocks = sorted((b for m, b in gathers if m != ""), reverse=True)
    unsharded = root + sum(blocks[:1])
    peak = root + sum(blocks[:2])
    out = []
    for rank in range(run.world_size):
        local = sum(local_bytes(p, rank) for p in params)
        opt = None
        if run.optimizer is not None and training:
            opt = 0
            for name, _key, shape, nbytes in run.optimizer_state:
                p = by_name.get(name)
                if p is not None and shape and shape[0] == shard_rows(p.shape[0], p.padded_shard[0], 0) \
                        and tuple(shape[1:]) == tuple(p.shape[1:]):
                    opt += local_bytes(p, rank) * nbytes // max(1, local_bytes(p, 0))
                else:
                    opt += nbytes
        out.append(Fsdp2RankMemory(rank, padded, local, local if training else 0, opt, unsharded, peak))
    return tuple(out)


def eager_collectives(run: Any) -> tuple[UnitCollectives, ...]:
    """The step's eager collectives grouped by unit and op, in the order they first ran."""
    groups: dict[tuple, list] = {}
    for c in run.collectives:
        op = c.op.replace("_single", "").replace("_into_tensor", "").replace("_tensor", "")
        groups.setdefault((c.unit if c.unit is not None else "?", op, c.input_bytes, c.output_bytes), []).append(c)
    order = {u.module: i for i, u in enumerate(run.units)}
    rows = [UnitCollectives(unit, op, len(cs), sent, received) for (unit, op, sent, received), cs in groups.items()]
    return tuple(sorted(rows, key=lambda r: (order.get(r.unit, len(order)), r.op)))


def build_fsdp2_report(capture: Any, run: Any) -> Fsdp2Report:
    """``run`` (a :class:`~graphtool.capture.distributed.fsdp2.Fsdp2Run`) with ``capture``'s graphs and breaks."""
    from graphtool.capture.graph_breaks import is_user_file

    units = []
    for u in run.units:
        full = sum(_numel(p.shape) * p.element_size for p in u.params)
        shard = sum(_numel(p.padded_shard) * p.element_size for p in u.params)
        units.append(FsdpUnit(u.module, len(u.params), full, shard, shard * run.world_size))
    breaks = []
    for b in capture.breaks:
        user = next((f for f in reversed(b.stack) if is_user_file(f.file)), None)
        torch_at = Source(b.file, b.line) if b.file and b.line else None
        breaks.append(FsdpBreak(b.reason, b.skips_frame, torch_at, Source(user.file, user.line) if user else None))
    in_graphs = tuple(collectives_in(capture, getattr(run, "group_sizes", None)))
    uneven = [p.name for u in run.units for p in u.params
              if p.shape and p.shape[0] != p.padded_shard[0] * run.world_size]
    notes = [EAGER_NOTE if run.skip_fsdp_hooks else TRACEABLE_NOTE]
    if run.compiled_by_script:
        notes.append(SCRIPT_COMPILED_NOTE.format(n=len(run.compiled_by_script), first=run.compiled_by_script[0] or "(root)"))
    if any(b.torch_source and "/fsdp/" in b.torch_source.file.replace("\\", "/") for b in breaks):
        notes.insert(0, SKIPPED_ROOT_NOTE)
    same = not in_graphs or not uneven
    if same:
        notes.append(SAME_GRAPHS_NOTE)
    if uneven:
        notes.append(UNEVEN_NOTE.format(n=len(uneven), ws=run.world_size, first=uneven[0]))
    regions_with = {c.region for c in in_graphs}
    notes.append(HAS_COLLECTIVE_GRAPHS.format(n=len(regions_with)) if regions_with else NO_COLLECTIVE_GRAPHS)
    predicted = list(PREDICTED_ONLY)
    if not same:
        predicted.append("whether every rank compiles the same graphs (collectives with uneven shards in them)")
    return Fsdp2Report(run.wrapper, run.world_size, tuple(units), len(capture.regions), tuple(breaks), in_graphs,
                       eager_collectives(run), same, run.optimizer, fsdp2_rank_memory(run, training=capture.training),
                       tuple(predicted), tuple(notes))
