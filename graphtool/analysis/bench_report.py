"""The ``graphtool bench`` report: each mode's check and timing, and its speedup over eager."""

from __future__ import annotations

from dataclasses import dataclass

from graphtool.analysis.timing_stats import SPREAD_LIMIT_PCT, speedup, summarize


@dataclass(frozen=True)
class ModeReport:
    name: str
    status: str  # ok | mismatch | error | skipped | unchecked (timed; random ops made the check impossible)
    reason: str | None
    stats: object | None  # TimingStats
    speedup: float | None
    max_abs_diff: float | None
    peak_memory_bytes: int | None
    pool_bytes: int | None
    check: str | None = None  # "as written" | "dropout off": what eager was compared with; None: not compared

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
            "check": self.check,
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
    random_ops: dict | None = None  # drawn, check ("dropout off"), turned_off, still_drawn; None: none drawn
    own_step: dict | None = None  # kind, evidence: the call is a training step with its own backward and optimizer
    timed_why: str | None = None  # why what was timed was (training by default, as every command; or as asked)

    @property
    def timed(self) -> str:
        """What one timed iteration is: ``forward``, ``forward + backward`` or ``training step`` (the model's own)."""
        return "training step" if self.own_step else "forward + backward" if self.backward else "forward"

    def random_ops_note(self) -> str | None:
        """How modes were checked when the model draws random numbers (dropout in training).

        >>> r = BenchReport("m.py", "model", "cpu", "0", "2", {}, False, 1, 10, 3, (), None,
        ...                 random_ops={"drawn": {"bernoulli_": "m.py:12"}, "check": "dropout off",
        ...                             "turned_off": ["1 dropout module (p=0.1) set to p=0"], "still_drawn": {}})
        >>> r.random_ops_note()[:95]
        'the model draws random numbers (bernoulli_ at m.py:12): each mode was checked against eager wit'
        """
        if not self.random_ops:
            return None
        drawn = ", ".join(f"{op} at {where}" if where else op for op, where in self.random_ops["drawn"].items())
        text = (f"the model draws random numbers ({drawn}): each mode was checked against eager with dropout off "
                f"({'; '.join(self.random_ops['turned_off'])}), then timed as written, dropout on")
        if self.random_ops["still_drawn"]:
            left = ", ".join(f"{op} at {where}" if where else op for op, where in self.random_ops["still_drawn"].items())
            text += (f"; random ops that are not dropout ({left}) stay on, so a mode that differs from eager is "
                     "timed and marked unchecked")
        return text

    def insights(self) -> list[dict]:
        """What the numbers mean beyond the table. With graphtool's whole-step CUDA graph and
        reduce-overhead both timed: how much reduce-overhead leaves on the table, and why.

        >>> from graphtool.analysis.timing_stats import summarize
        >>> def mode(name, ms):
        ...     return ModeReport(name, "ok", None, summarize([ms]), None, 0.0, None, None)
        >>> r = BenchReport("m.py", "model", "NVIDIA H100", "0", "2", {}, True, 1, 10, 3,
        ...                 (mode("cudagraph replay", 0.38), mode("compile[reduce-overhead]", 1.47)), None)
        >>> i = r.insights()[0]
        >>> i["code"], i["ratio"], i["left_on_table_ms"]
        ('reduce_overhead_gap', 3.87, 1.09)
        """
        by_name = {m.name: m for m in self.modes if m.status == "ok" and m.stats}
        replay, ro = by_name.get("cudagraph replay"), by_name.get("compile[reduce-overhead]")
        if not (replay and ro):
            return []
        whole, per = replay.stats.median_ms, ro.stats.median_ms
        ratio, gap = per / whole, per - whole
        step = "forward + backward step" if self.backward else "forward"
        if ratio <= 1.05:
            text = (f"compile[reduce-overhead] ({per:.4g} ms) is within 5% of the whole {step} captured as one CUDA "
                    f"graph ({whole:.4g} ms): it leaves almost nothing on the table here")
        else:
            text = (f"compile[reduce-overhead] takes {per:.4g} ms per {step} against {whole:.4g} ms for the whole "
                    f"{step} captured as one CUDA graph ({ratio:.1f}x): it leaves {gap:.4g} ms "
                    f"({gap / per:.0%}) per step on the table. Where it goes: on every call torch.compile checks its "
                    "guards and cudagraph trees checks which recorded graph to replay and that its inputs and "
                    "outputs are where it left them; inductor splits the graph into partitions around CPU work and "
                    "ops a CUDA graph cannot hold, each its own replay with eager code between; graph breaks leave "
                    "eager gaps between compiled regions"
                    + ("; and forward and backward are separate graphs with autograd's engine between them"
                       if self.backward else "")
                    + ". The whole-step graph is one launch with none of that (and no Python at all)")
        return [{"code": "reduce_overhead_gap", "text": text, "reduce_overhead_ms": round(per, 6),
                 "whole_step_graph_ms": round(whole, 6), "ratio": round(ratio, 2), "left_on_table_ms": round(gap, 6)}]

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
                         "spread_limit_pct": self.spread_limit_pct, "own_step": self.own_step,
                         "timed": self.timed, "timed_why": self.timed_why},
            "modes": [m.to_dict(self.spread_limit_pct) for m in self.modes],
            "warnings": self.warnings(),
            "cudagraphs_verdict": self.verdict,
            "random_ops": self.random_ops,
            "insights": self.insights(),
        }


def build_bench_report(spec, device: str, results, *, backward, warmup, iters, repeat, verdict=None) -> BenchReport:
    stats = {r.name: summarize(list(r.samples_ms)) if r.samples_ms else None for r in results}
    eager = stats.get("eager")
    modes = tuple(
        ModeReport(r.name, r.status, r.reason, stats[r.name], speedup(eager, stats[r.name]),
                   r.max_abs_diff, r.peak_memory_bytes, r.pool_bytes, getattr(r, "check", None))
        for r in results
    )
    random_ops = next((r.random_ops for r in results if getattr(r, "random_ops", None)), None)
    own_step = next((r.own_step for r in results if getattr(r, "own_step", None)), None)
    # eager's run decided what was timed when the caller left it to the model (backward=None)
    decided = next((r for r in results if getattr(r, "backward", None) is not None), None)
    backward = decided.backward if decided is not None else bool(backward)
    timed_why = decided.timed_why if decided is not None else None
    import os
    import platform

    import torch

    from graphtool import __version__

    host = {"machine": platform.machine(), "cpus": os.cpu_count(), "python": platform.python_version()}
    return BenchReport(str(spec.path), spec.entry, device, __version__, str(torch.__version__), host,
                       backward, warmup, iters, repeat, modes, verdict, random_ops=random_ops, own_step=own_step,
                       timed_why=timed_why)
