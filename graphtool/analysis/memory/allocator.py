"""The CUDA caching allocator's segments, simulated: how many bytes a sequence of allocations and frees reserves.

Under ``mode="reduce-overhead"`` every graph cudagraph trees records allocates from one private pool; what the
pool reserves is what the step costs, and it is more than the most bytes live at once, because a freed block is
only reused by a request it fits (fragmentation). The rules are the caching allocator's own
(c10/cuda/CUDACachingAllocator.cpp, unchanged from torch 2.11 to 2.15, with its default settings: no
``max_split_size_mb``, no ``expandable_segments``, no ``roundup_power2_divisions``):

* a request is rounded up to 512 bytes (``kMinBlockSize``);
* requests of at most 1 MiB come from the small pool, larger ones from the large pool;
* a new segment is 2 MiB for a small request, 20 MiB for a large one under 10 MiB, else the request rounded up
  to 2 MiB;
* a free block is found best fit: the smallest free block of the same pool and stream at least as large (the
  lowest address among equals);
* a block is split when what remains is at least 512 bytes (small pool) or more than 1 MiB (large pool); the
  allocation takes the block's front;
* a freed block merges with free neighbours in its segment; segments are never released here (a private pool
  keeps its segments while its graphs live).

    >>> a = Allocator()
    >>> x = a.malloc(8 * 2**20)          # a 20 MiB segment, split
    >>> y = a.malloc(8 * 2**20)          # the rest of it
    >>> z = a.malloc(16 * 2**20)         # 4 MiB left does not fit: a new 16 MiB segment
    >>> a.free(x); a.free(y)
    >>> w = a.malloc(16 * 2**20)         # x and y merged: 20 MiB free, reused
    >>> a.reserved // 2**20, a.peak_allocated // 2**20
    (36, 32)

tests/analysis/test_allocator.py replays the allocation traces the H200 recorded (tests/truth/gpu/pool-traces-*)
and gets the pool's reserved bytes the GPU reported.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass

MIN_BLOCK = 512
SMALL_SIZE = 1 << 20
SMALL_BUFFER = 2 << 20
LARGE_BUFFER = 20 << 20
MIN_LARGE_ALLOC = 10 << 20
ROUND_LARGE = 2 << 20


def round_size(size: int) -> int:
    """A request's block size: at least 512 bytes, a multiple of 512."""
    return MIN_BLOCK if size < MIN_BLOCK else -(-size // MIN_BLOCK) * MIN_BLOCK


def segment_size(size: int) -> int:
    """The segment a request that finds no free block allocates."""
    if size <= SMALL_SIZE:
        return SMALL_BUFFER
    if size < MIN_LARGE_ALLOC:
        return LARGE_BUFFER
    return -(-size // ROUND_LARGE) * ROUND_LARGE


@dataclass(eq=False)
class _Block:
    ptr: int
    size: int
    small: bool
    stream: int
    free: bool = True
    prev: _Block | None = None
    next: _Block | None = None


class Allocator:
    """One pool of the caching allocator (a graph pool, or the default one without its cache flushes)."""

    def __init__(self) -> None:
        self._free: dict[tuple[bool, int], list[tuple[int, int, _Block]]] = {}  # (small, stream) -> sorted
        self._next_ptr = 0
        self.reserved = 0
        self.allocated = 0
        self.peak_allocated = 0
        self.peak_reserved = 0
        self.segments: list[int] = []

    def _insert(self, b: _Block) -> None:
        bisect.insort(self._free.setdefault((b.small, b.stream), []), (b.size, b.ptr, b))

    def _remove(self, b: _Block) -> None:
        lst = self._free[(b.small, b.stream)]
        i = bisect.bisect_left(lst, (b.size, b.ptr))
        while lst[i][2] is not b:
            i += 1
        del lst[i]

    def malloc(self, size: int, stream: int = 0) -> _Block:
        size = round_size(size)
        small = size <= SMALL_SIZE
        lst = self._free.get((small, stream), [])
        i = bisect.bisect_left(lst, (size, -1))
        if i < len(lst):
            block = lst[i][2]
            del lst[i]
        else:
            seg = segment_size(size)
            block = _Block(self._next_ptr, seg, small, stream)
            self._next_ptr += seg + (1 << 40)  # segments never touch
            self.reserved += seg
            self.segments.append(seg)
            self.peak_reserved = max(self.peak_reserved, self.reserved)
        remaining = block.size - size
        if (small and remaining >= MIN_BLOCK) or (not small and remaining > SMALL_SIZE):
            rest = _Block(block.ptr + size, remaining, small, stream, True, block, block.next)
            if block.next is not None:
                block.next.prev = rest
            block.next = rest
            block.size = size
            self._insert(rest)
        block.free = False
        self.allocated += block.size
        self.peak_allocated = max(self.peak_allocated, self.allocated)
        return block

    def free(self, block: _Block) -> None:
        if block.free:
            raise ValueError("block freed twice")
        block.free = True
        self.allocated -= block.size
        for nb in (block.prev, block.next):
            if nb is not None and nb.free:
                self._remove(nb)
                if nb is block.prev:
                    block.ptr, block.size, block.prev = nb.ptr, nb.size + block.size, nb.prev
                    if nb.prev is not None:
                        nb.prev.next = block
                else:
                    block.size, block.next = block.size + nb.size, nb.next
                    if nb.next is not None:
                        nb.next.prev = block
        self._insert(block)
