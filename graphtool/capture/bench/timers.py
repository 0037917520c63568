"""Clocks around work, and the warm-up-then-repeat loop that reads them: raw samples, no statistics.

One *repeat* runs ``iters`` iterations between two timer readings; its per-iteration latency is
the elapsed time divided by ``iters``.

Example::

    >>> class Fake:
    ...     def start(self): pass
    ...     def stop(self): return 20.0
    >>> measure(lambda i: None, Fake(), warmup=1, iters=10, repeat=2)
    (2.0, 2.0)
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Protocol


class Timer(Protocol):
    """Measures a block of work. ``start()`` then ``stop()`` returns milliseconds elapsed.

    On CUDA: events recorded on the stream, then synchronised. On CPU: the host clock, with the
    work finished before each reading. Tests inject a fake one."""

    def start(self) -> None: ...

    def stop(self) -> float: ...


class HostTimer:
    """Host clock around work finished by ``sync`` (``torch.cuda.synchronize`` or a no-op)."""

    def __init__(self, sync: Callable[[], None] = lambda: None):
        self.sync = sync
        self._t0 = 0.0

    def start(self) -> None:
        self.sync()
        self._t0 = time.perf_counter()

    def stop(self) -> float:
        self.sync()
        return (time.perf_counter() - self._t0) * 1000.0


class CudaEventTimer:
    """CUDA events on the current stream: measures GPU time, not host launch time."""

    def __init__(self, torch):
        self.torch = torch
        self._start = self._end = None

    def start(self) -> None:
        self.torch.cuda.synchronize()
        self._start = self.torch.cuda.Event(enable_timing=True)
        self._end = self.torch.cuda.Event(enable_timing=True)
        self._start.record()

    def stop(self) -> float:
        self._end.record()
        self._end.synchronize()
        return float(self._start.elapsed_time(self._end))


def measure(step: Callable[[int], object], timer: Timer, *, warmup: int, iters: int, repeat: int,
            on_progress: Callable[[int], None] | None = None) -> tuple[float, ...]:
    """Run ``step(i)`` ``warmup`` times untimed, then ``repeat`` timed blocks of ``iters`` calls.

    ``i`` counts every call, so a step can rotate through several input sets. Returns the
    per-iteration milliseconds of each repeat; ``graphtool.analysis.timing_stats`` summarizes them.
    """
    if iters < 1 or repeat < 1 or warmup < 0:
        raise ValueError("iters and repeat must be >= 1, warmup >= 0")
    calls = 0
    for _ in range(warmup):
        step(calls)
        calls += 1
    samples = []
    for _ in range(repeat):
        timer.start()
        for _ in range(iters):
            step(calls)
            calls += 1
        samples.append(timer.stop() / iters)
        if on_progress:
            on_progress(iters)
    return tuple(samples)
