"""Python's cyclic garbage collector while torch traces: the young generations only.

A trace builds dynamo's, AOT autograd's and inductor's graphs, hundreds of thousands of objects that live
until the trace ends. CPython runs a full collection each time the objects that survived the young
generations have grown by a quarter, and each full collection walks every one of them again: 14% of
``graphtool report``'s CPU on a 550-module model (benchmarks/large_model.py at 50 blocks; 5.0 of 35 s),
a share that grows with the model, since a bigger heap is walked more times. Inside
:func:`young_generations_only` the young generations are still collected (most of the garbage a trace
makes dies young), and a full collection waits until the trace is over, when CPython schedules one as it
always does.

    >>> import gc
    >>> before = gc.get_threshold()
    >>> with young_generations_only():
    ...     gc.get_threshold()[2] > 1_000_000
    True
    >>> gc.get_threshold() == before
    True
"""

from __future__ import annotations

import contextlib
import gc

#: threshold 2: how many collections of the middle generation trigger a full one (default 10)
_NEVER = 1 << 30


@contextlib.contextmanager
def young_generations_only():
    """One full collection now, then none inside the block (an explicit ``gc.collect()`` still is one); the
    caller's thresholds, whatever they were, are put back after it.

    The collection first frees what the work before left (the previous trace's graphs, once dynamo's caches
    are reset, are cycles only a full collection frees): the block's peak does not hold them too."""
    thresholds = gc.get_threshold()
    if gc.isenabled():
        gc.collect()
    gc.set_threshold(thresholds[0], thresholds[1], _NEVER)
    try:
        yield
    finally:
        gc.set_threshold(*thresholds)
