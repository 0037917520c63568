"""Run a call with room on CPython's frame stack, so that a hot loop never maps and unmaps a stack chunk.

CPython 3.11+ keeps Python frames in 16 KiB chunks (``_PyStackChunk``) and frees a chunk as soon as the
frame at its base returns. A loop that calls a function whose frame lands first in a fresh chunk (in
dynamo and inductor's pattern matcher there are many) then pays an ``mmap`` and a ``munmap`` on every
call: a ``graphtool trace`` of a 12-layer encoder made 43,000 such pairs (``strace -f -c``), the bare
torch script 50,000, and which loops are hit depends on the exact depth at which torch runs, so it
changes with the caller, the model and the torch release (docs/speed.md, "The stack").

:func:`with_stack_room` runs a function inside a frame that reserves a large, never-used value stack.
That frame opens a chunk big enough for it and for everything called beneath it (the chunk is sized
in powers of two, and the frame takes just over half), and the chunk lives as long as the frame, so
no deeper frame crosses a chunk boundary: the same trace then makes about 550 ``mmap`` calls in all.
Only touched pages of the chunk are ever backed by memory; the reserved stack itself is never
written. Where there are no stack chunks (CPython 3.10, other interpreters) the function is returned
as it is.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from typing import TypeVar

F = TypeVar("F", bound=Callable)

# value-stack slots the outer frame reserves: 4 MiB of pointers, so its chunk is 8 MiB and about
# 4 MiB of it is left for the frames below (dynamo's deepest inlining uses a few hundred KiB)
RESERVED_SLOTS = (1 << 19) + 64

HAS_STACK_CHUNKS = sys.implementation.name == "cpython" and sys.version_info >= (3, 11)


def _roomy(fn, args, kwargs):
    return fn(*args, **kwargs)


if HAS_STACK_CHUNKS:
    _roomy.__code__ = _roomy.__code__.replace(co_stacksize=RESERVED_SLOTS)


def call_with_stack_room(fn: Callable, *args, **kwargs):
    """``fn(*args, **kwargs)``, every frame beneath it in one stack chunk (see the module's docstring)."""
    return _roomy(fn, args, kwargs)


def with_stack_room(fn: F) -> F:
    """``fn``, run by :func:`call_with_stack_room` on every call; ``fn`` itself where there are no chunks."""
    if not HAS_STACK_CHUNKS:
        return fn

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        return _roomy(fn, args, kwargs)

    return wrapper  # type: ignore[return-value]
