"""The ``graphtool bench`` report: each mode's check and timing, and its speedup over eager."""

from __future__ import annotations

from dataclasses import dataclass

from graphtool.analysis.timing_stats import SPREAD_LIMIT_PCT, speedup, summarize


@dataclass(frozen=True)
class ModeReport:
    name: str
    status: str  # ok | mismatch | error | skipped
    reason: str | None
    stats: object | None  # TimingStats
    speedup: float | None
    max_abs_diff: float | None
    peak_memory_bytes: int | None
    pool_bytes: int | None

    def noisy(self, limit_pct: float = SPREAD_LIMIT_PCT) -> bool:
        """Timed, but its repeats disagree by more than ``limit_pct`` percent."""
        return self.stats is not None and self.stats.noisy(limit_pct)

    def to_dict(self, limit_pct: float = SPREAD_LIMIT_PCT) -> dict:
        return {
            "name": self.name,
            "status": self.status,
            "reason": self.reason,
            **(self.stats.to_dict() if self.stats else {"median_ms": None, "min_ms": None, "max_ms": None, "spread_pct": None, "samples_ms": []}),
            "speedup_vs_eager": round(self.speedup, 4) if self.speedup else None,
            "max_abs_diff": self.max_abs_diff,
            "peak_memory_bytes": self.peak_memory_bytes,
            "graph_pool_bytes": self.pool_bytes,
            "noisy": self.noisy(limit_pct),
        }


@dataclass(frozen=True)
class BenchReport:
    path: str
    entry: str
    device: str
    graphtool_version: str
    torch_version: str
    host: dict  # machine, cpus, python: timings mean little without them
    backward: bool
    warmup: int
    iters: int
    repeat: int
    modes: tuple[ModeReport, ...]
    verdict: dict | None  # the CUDA-graph verdict consulted before capture
    spread_limit_pct: float = SPREAD_LIMIT_PCT  # above it, a mode's timings are flagged as noisy

    def warnings(self) -> list[str]:
        """What makes these numbers hard to trust: modes whose repeats disagree by more than the limit.

        >>> from graphtool.analysis.timing_stats import summarize
        >>> m = ModeReport("eager", "ok", None, summarize([1.0, 1.2, 1.0]), 1.0, 0.0, None, None)
        >>> BenchReport("m.py", "model", "cpu", "0", "2", {}, False, 1, 10, 3, (m,), None).warnings()[0][:55]
        'the repeats disagree by more than 5% (eager 20.0%): the'
        """
        noisy = [m for m in self.modes if m.noisy(self.spread_limit_pct)]
        if not noisy:
            return []
        spreads = ", ".join(f"{m.name} {m.stats.spread_pct:.1f}%" for m in noisy)
        return [
            f"the repeats disagree by more than {self.spread_limit_pct:g}% ({spreads}): these timings cannot be "
            f"trusted; raise --iters (now {self.iters}) or --repeat (now {self.repeat}), or run on a quieter machine"
        ]

    def to_dict(self) -> dict:
        return {
            "schema_version": 1,
            "graphtool_version": self.graphtool_version,
            "torch_version": self.torch_version,
            "model": {"path": self.path, "entry": self.entry},
            "device": self.device,
            "host": self.host,
            "settings": {"backward": self.backward, "warmup": self.warmup, "iters": self.iters, "repeat": self.repeat,
                         "spread_limit_pct": self.spread_limit_pct},
            "modes": [m.to_dict(self.spread_limit_pct) for m in self.modes],
            "warnings": self.warnings(),
            "cudagraphs_verdict": self.verdict,
        }


def build_bench_report(spec, device: str, results, *, backward, warmup, iters, repeat, verdict=None) -> BenchReport:
    stats = {r.name: summarize(list(r.samples_ms)) if r.samples_ms else None for r in results}
    eager = stats.get("eager")
    modes = tuple(
        ModeReport(r.name, r.status, r.reason, stats[r.name], speedup(eager, stats[r.name]),
                   r.max_abs_diff, r.peak_memory_bytes, r.pool_bytes)
        for r in results
    )
    import os
    import platform

    import torch

    from graphtool import __version__

    host = {"machine": platform.machine(), "cpus": os.cpu_count(), "python": platform.python_version()}
    return BenchReport(str(spec.path), spec.entry, device, __version__, str(torch.__version__), host,
                       backward, warmup, iters, repeat, modes, verdict)
