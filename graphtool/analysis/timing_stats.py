"""Statistics of benchmark timings, as plain values (no torch, no clock): tested with made-up samples.

One *repeat* runs ``iters`` iterations between two timer readings; its per-iteration latency is
the elapsed time divided by ``iters``. Over ``repeat`` repeats we report the median, min, max and
the spread ``(max - min) / median``: how far the repeats disagree.

Example::

    >>> s = summarize([1.00, 1.02, 0.99])
    >>> (round(s.median_ms, 2), round(s.spread_pct, 1))
    (1.0, 3.0)
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass

#: above this spread (percent) the repeats disagree too much for a median to be trusted
SPREAD_LIMIT_PCT = 5.0


@dataclass(frozen=True)
class TimingStats:
    samples_ms: tuple[float, ...]  # per-iteration latency of each repeat
    median_ms: float
    min_ms: float
    max_ms: float
    spread_pct: float

    def to_dict(self) -> dict:
        return {
            "median_ms": round(self.median_ms, 6),
            "min_ms": round(self.min_ms, 6),
            "max_ms": round(self.max_ms, 6),
            "spread_pct": round(self.spread_pct, 3),
            "samples_ms": [round(s, 6) for s in self.samples_ms],
        }

    def noisy(self, limit_pct: float = SPREAD_LIMIT_PCT) -> bool:
        """Whether the repeats disagree by more than ``limit_pct`` percent.

        >>> summarize([1.0, 1.5, 1.0]).noisy(), summarize([1.0, 1.01]).noisy()
        (True, False)
        """
        return self.spread_pct > limit_pct


def summarize(samples_ms: list[float]) -> TimingStats:
    if not samples_ms:
        raise ValueError("no timing samples")
    med = statistics.median(samples_ms)
    lo, hi = min(samples_ms), max(samples_ms)
    spread = (hi - lo) / med * 100.0 if med > 0 else 0.0
    return TimingStats(tuple(samples_ms), med, lo, hi, spread)


def speedup(baseline: TimingStats | None, other: TimingStats | None) -> float | None:
    """How many times faster than ``baseline`` (median over median)."""
    if baseline is None or other is None or other.median_ms <= 0:
        return None
    return baseline.median_ms / other.median_ms
