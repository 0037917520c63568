"""``--ddp``'s per-rank check: build every rank's model, trace the ranks that could differ from rank 0.

Example::

    >>> from graphtool.commands.session import Session
    >>> r = Session("examples/mlp.py", ddp=True, world_size=4).trace()
    >>> r.ddp.ranks.same, r.ddp.ranks.traced
    (True, (0,))
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from graphtool.commands.progress import SILENT, Progress


def rank_differences(target: Any, entry, factory_args: tuple, world_size: int, rank0: Any,
                     trace_rank: Callable[[int], Any], progress: Progress = SILENT):
    """The :class:`~graphtool.analysis.distributed.ranks.RanksReport` of a launch of ``world_size`` ranks: ``rank0``
    is rank 0's capture; ``trace_rank(r)`` traces rank ``r`` as rank 0 was traced.

    Rank 1's model is always built; every other rank's only when the script reads its rank (a
    ``get_rank``/``RANK`` in its source, or rank 1's build asked for it): a script that never does
    builds the same on every rank, and a large model is then built twice, not ``world_size`` times."""
    from graphtool.analysis.distributed.ranks import build_ranks_report, capture_outcome
    from graphtool.capture.distributed import ranks

    if world_size == 1 or not isinstance(target, (str, os.PathLike)):  # one rank, or one object handed to every rank
        sigs = [ranks.signature_of(rank0.spec, r) for r in range(world_size)]
        return build_ranks_report(world_size, sigs, {0: capture_outcome(rank0)}, {}, built=(0,))
    lines = ranks.reads_rank(target)
    progress.phase(f"building rank 1's model of {world_size}...")
    sigs = [ranks.signature_of(rank0.spec, 0), ranks.rank_signature(target, entry, factory_args, 1, world_size)]
    if lines or sigs[1].read_rank:
        progress.phase(f"building the model of each of {world_size} ranks...")
        sigs += [ranks.rank_signature(target, entry, factory_args, r, world_size) for r in range(2, world_size)]
        built = tuple(range(world_size))
    else:  # nothing in the script asks for its rank: ranks 2.. build what rank 1 built
        sigs += [replace(sigs[1], rank=r) for r in range(2, world_size)]
        built = (0, 1)
    outcomes = {0: capture_outcome(rank0)}
    guards = {}
    for r in ranks.ranks_to_trace(sigs, reads_rank=bool(lines)):
        progress.phase(f"tracing rank {r} of {world_size}...")
        capture = trace_rank(r)  # its errors name the rank
        outcomes[r] = capture_outcome(capture)
        if sigs[r].key != sigs[0].key and sigs[r].params == sigs[0].params and sigs[r].modules == sigs[0].modules:
            with ranks.as_rank(0, world_size):
                guards[r] = ranks.guard_failure(rank0.spec.model, rank0.spec, capture.spec)
    return build_ranks_report(world_size, sigs, outcomes, guards, lines, built)
