"""The caching-allocator simulation (graphtool/analysis/memory/allocator.py) against the H200: replaying the
allocations and frees cudagraph trees' pool got (tests/truth/gpu/pool-traces-h200-torch2.11.json.gz, recorded by
tests/truth/gpu/pool_traces.py) reserves exactly the segments the GPU reserved, for all nine cases."""

from __future__ import annotations

import gzip
import json

import pytest

from graphtool.analysis.memory.allocator import LARGE_BUFFER, SMALL_BUFFER, Allocator, round_size, segment_size
from tests.helpers import ROOT

pytestmark = pytest.mark.one_torch  # pure Python over recorded traces: no torch in the answer

TRACES = ROOT / "tests" / "truth" / "gpu" / "pool-traces-h200-torch2.11.json.gz"


def cases() -> dict:
    with gzip.open(TRACES, "rt") as f:
        return json.load(f)["cases"]


@pytest.mark.parametrize("case", sorted(cases()))
def test_replaying_the_h200_pool_trace_reserves_its_segments(case):
    doc = cases()[case]
    a, live = Allocator(), {}
    for op, block, size, stream in doc["events"]:
        if op == "a":
            live[block] = a.malloc(size, stream)
        else:
            a.free(live.pop(block))
    assert sorted(a.segments, reverse=True) == doc["segments"]
    assert a.reserved == doc["pool_reserved"]


def test_the_allocator_rules():
    assert (round_size(1), round_size(513), segment_size(2**20), segment_size(2**20 + 1)) == (512, 1024, SMALL_BUFFER,
                                                                                              LARGE_BUFFER)
    assert segment_size(11 * 2**20) == 12 * 2**20
    a = Allocator()
    small = [a.malloc(1000) for _ in range(3)]  # one 2 MiB segment, split
    assert a.segments == [SMALL_BUFFER]
    for b in small:
        a.free(b)
    whole = a.malloc(2**20)  # the three merged back: a 1 MiB block is cut from the same segment
    assert a.segments == [SMALL_BUFFER] and whole.size == 2**20 and a.allocated == 2**20
    other = a.malloc(1000, stream=1)  # another stream never takes this stream's free blocks
    assert len(a.segments) == 2 and other.stream == 1
    with pytest.raises(ValueError):
        a.free(whole)
        a.free(whole)
