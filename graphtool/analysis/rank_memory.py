"""What one rank holds under data parallelism, as plain numbers: ``RankMemory``.

Under DDP every rank holds the whole model: its parameters, their gradients, DDP's gradient
buckets (the reducer allocates one flat tensor per bucket and, with ``gradient_as_bucket_view=False``,
DDP's default, copies each gradient into it before the allreduce, so the buckets add the bytes of
every parameter it reduces), the optimizer's state and the activations the step saves for backward.
FSDP2 shards parameters, gradients and optimizer state and all-gathers parameters around each use
(``allgather_bytes``); graphtool's FSDP2 report fills the same class.

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

    @property
    def total_bytes(self) -> int:
        return (self.params_bytes + self.grads_bytes + self.bucket_bytes + self.optimizer_bytes
                + self.activations_bytes + self.allgather_bytes)

    def to_dict(self) -> dict:
        return {"params_bytes": self.params_bytes, "grads_bytes": self.grads_bytes, "bucket_bytes": self.bucket_bytes,
                "optimizer_bytes": self.optimizer_bytes, "activations_bytes": self.activations_bytes,
                "allgather_bytes": self.allgather_bytes, "total_bytes": self.total_bytes, "notes": list(self.notes)}


def ddp_rank_memory(memory, buckets: dict | None, optimizer_bytes: int | None, notes: tuple[str, ...] = ()) -> RankMemory:
    """One DDP rank: parameters and gradients from ``memory`` (a
    :class:`~graphtool.analysis.memory.MemoryReport`), the activations its compiled graphs save,
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
