"""What one rank holds under data parallelism, as plain numbers: ``RankMemory``.

Under DDP every rank holds the whole model: its parameters, their gradients, DDP's gradient
buckets (the reducer allocates one flat tensor per bucket and, with ``gradient_as_bucket_view=False``,
DDP's default, copies each gradient into it before the allreduce, so the buckets add the bytes of
every parameter it reduces), the optimizer's state and the activations the step saves for backward.
FSDP2 shards parameters, gradients and optimizer state and all-gathers parameters around each use
(``allgather_bytes``); ``memory --fsdp2`` fills the same class for each rank (:func:`fsdp2_rank_memory`:
the ranks differ when a dimension does not split evenly), the busiest one on top and every rank in
``per_rank``.

Example::

    >>> m = RankMemory(params_bytes=4096, grads_bytes=4096, bucket_bytes=4096, optimizer_bytes=8192,
    ...                activations_bytes=1024)
    >>> m.total_bytes, m.to_dict()["allgather_bytes"]
    (21504, 0)
"""

from __future__ import annotations

from dataclasses import dataclass, field

#: why the buckets cost nothing more when the gradients are views into them
BUCKET_VIEW_NOTE = ("gradient_as_bucket_view=True: the gradients are views into DDP's buckets, "
                    "so the buckets add no bytes beyond the gradients")
BUCKET_NOTE = ("DDP's reducer allocates one flat tensor per gradient bucket and copies each gradient into it "
               "(gradient_as_bucket_view=False, DDP's default): {buckets} bucket(s) as DDP logs them at construction "
               "(it rebuilds them in gradient order after the first step: other cuts, the same bytes)")
NO_OPTIMIZER_NOTE = ("no optimizer state counted: the script defines no get_optimizer(model) (return the "
                     "optimizer the launch will use; its state is measured after one step)")


@dataclass(frozen=True)
class RankMemory:
    """Bytes one rank holds during a training step, by what holds them."""

    params_bytes: int
    grads_bytes: int
    bucket_bytes: int
    optimizer_bytes: int
    activations_bytes: int
    allgather_bytes: int = 0  # FSDP: the unsharded parameters gathered around a use (0 under DDP)
    notes: tuple[str, ...] = field(default_factory=tuple)
    rank: int | None = None  # FSDP2: which rank this is (under DDP every rank holds the same)
    per_rank: tuple[RankMemory, ...] = ()  # FSDP2: every rank, this one included

    @property
    def total_bytes(self) -> int:
        return (self.params_bytes + self.grads_bytes + self.bucket_bytes + self.optimizer_bytes
                + self.activations_bytes + self.allgather_bytes)

    def to_dict(self) -> dict:
        return {"params_bytes": self.params_bytes, "grads_bytes": self.grads_bytes, "bucket_bytes": self.bucket_bytes,
                "optimizer_bytes": self.optimizer_bytes, "activations_bytes": self.activations_bytes,
                "allgather_bytes": self.allgather_bytes, "total_bytes": self.total_bytes, "notes": list(self.notes),
                **({"rank": self.rank} if self.rank is not None else {}),
                **({"per_rank": [_row(r) for r in self.per_rank]} if self.per_rank else {})}


def _row(r: RankMemory) -> dict:
    """One rank of ``per_rank``: its bytes, without the notes its summary carries."""
    return {k: v for k, v in r.to_dict().items() if k != "notes"}


def ddp_rank_memory(memory, buckets: dict | None, optimizer_bytes: int | None, notes: tuple[str, ...] = ()) -> RankMemory:
    """One DDP rank: parameters and gradients from ``memory`` (a
    :class:`~graphtool.analysis.memory.saved.MemoryReport`), the activations its compiled graphs save,
    DDP's buckets from torch's own figures (:func:`graphtool.capture.compat.ddp_bucket_sizes`),
    and the optimizer's state (None: the script gives no optimizer)."""
    said = list(notes)
    bucket_bytes = 0
    if buckets is not None:
        if buckets["gradient_as_bucket_view"]:
            said.append(BUCKET_VIEW_NOTE)
        else:
            bucket_bytes = sum(buckets["bucket_sizes"])
            said.append(BUCKET_NOTE.format(buckets=len(buckets["bucket_sizes"])))
    if optimizer_bytes is None:
        said.append(NO_OPTIMIZER_NOTE)
    activations = memory.compiled.by_kind.get("activation", (0, 0))[0]
    return RankMemory(memory.parameters.bytes, memory.gradients.bytes, bucket_bytes, optimizer_bytes or 0, activations,
                      notes=tuple(said))


FSDP2_SHARD_NOTE = ("FSDP2 shards parameters, gradients and optimizer state over {ws} rank(s) along dim 0 (padded to "
                    "a multiple of the world size): every rank allocates the padded shard, and gradients and optimizer "
                    "state follow the rows it owns")
FSDP2_ACTIVATIONS_NOTE = ("activations: what the compiled graphs save for backward, each graph counted once per call in "
                          "a step ({calls} call(s) of {graphs} graph(s): a graph serving several blocks saves once per "
                          "block); every rank saves the same for its own batch")
FSDP2_ROOT_NOTE = ("the root's own ops, outside the blocks, run eagerly in the frame dynamo skips: what they save (if "
                   "any) is not counted here; the eager column of the memory report counts the whole model")
FSDP2_ALLGATHER_NOTE = ("all-gathered (predicted only): the root's and the largest block's unsharded parameters, plus "
                        "the next block's all-gather buffer in flight (FSDP2's prefetch)")


def fsdp2_activations(memory, runs: dict[int, int]) -> tuple[int, int]:
    """``(bytes, calls)``: each compiled region's saved activations (``memory.regions``) times the calls
    of its forward in one step (``runs``: region -> calls; 1 when unknown)."""
    total = calls = 0
    for r in memory.regions:
        n = runs.get(r.region, 1) if runs else 1
        total += r.activation_bytes * n
        calls += n
    return total, calls


def fsdp2_rank_memory(memory, ranks, runs: dict[int, int], *, world_size: int, root_eager: bool = False) -> RankMemory:
    """Each FSDP2 rank's :class:`RankMemory` from ``ranks`` (the report's
    :class:`~graphtool.analysis.distributed.wrappers.Fsdp2RankMemory` rows) and the compiled graphs' saved
    activations in ``memory`` (a :class:`~graphtool.analysis.memory.saved.MemoryReport`) times the calls per
    step; the busiest rank on top (rank 0: the last ranks own fewer rows), every rank in ``per_rank``.
    ``root_eager``: dynamo skipped the root's frame, whose own ops save outside the compiled graphs.

    >>> from graphtool.analysis.distributed.wrappers import Fsdp2RankMemory
    >>> from types import SimpleNamespace
    >>> mem = SimpleNamespace(regions=(SimpleNamespace(region=0, activation_bytes=100),))
    >>> rows = (Fsdp2RankMemory(0, 1024, 1000, 1000, None, 4096, 8192), Fsdp2RankMemory(1, 1024, 900, 900, None, 4096, 8192))
    >>> top = fsdp2_rank_memory(mem, rows, {0: 3}, world_size=2)
    >>> top.rank, top.activations_bytes, [r.total_bytes for r in top.per_rank]
    (0, 300, [10516, 10416])
    """
    activations, calls = fsdp2_activations(memory, runs)
    notes = [FSDP2_SHARD_NOTE.format(ws=world_size),
             FSDP2_ACTIVATIONS_NOTE.format(calls=calls, graphs=len(memory.regions))]
    if root_eager:
        notes.append(FSDP2_ROOT_NOTE)
    notes.append(FSDP2_ALLGATHER_NOTE)
    if all(r.optimizer is None for r in ranks):
        notes.append(NO_OPTIMIZER_NOTE)
    rows = tuple(RankMemory(r.params, r.grads, 0, r.optimizer or 0, activations, r.allgather_peak, rank=r.rank)
                 for r in ranks)
    top = max(rows, key=lambda r: (r.total_bytes, -(r.rank or 0)))
    from dataclasses import replace

    return replace(top, notes=tuple(notes), per_rank=rows)
