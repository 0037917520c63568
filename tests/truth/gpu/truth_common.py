"""What the GPU-truth scripts of this folder count, shared: CUDA-graph recordings and replays, the functions
cudagraph trees recorded, torch's counters, and the CUDA allocator's figures.

Used by train_truth.py (issue 30), shapes_truth.py (issue 34) and memory_truth.py (issue 35). Each case runs
in a fresh process (``python SCRIPT one CASE``) with ``TORCH_LOGS=cudagraphs,perf_hints,recompiles`` and prints
one ``TRUTH {json}`` line; ``run_all`` runs every case in parallel and writes one JSON row per case as each
ends (so a run cut short keeps what finished). On a machine without CUDA the scripts run on the CPU
(``GT_TRUTH_DEVICE=cpu``): nothing is recorded, but the logic runs, so it is tested where no GPU is lent.
"""

from __future__ import annotations

import concurrent.futures as cf
import json
import os
import subprocess
import sys
import time

LOGS = "cudagraphs,perf_hints,recompiles"


def device() -> str:
    import torch

    return os.environ.get("GT_TRUTH_DEVICE") or ("cuda" if torch.cuda.is_available() else "cpu")


class Counting:
    """Counts CUDA-graph recordings (``torch.cuda.graph`` entered), replays and the distinct functions
    cudagraph trees recorded; reads torch's own counters."""

    def __init__(self):
        import torch

        self.captures = 0
        self.replays = 0
        self.functions: set = set()
        self.recorded: list = []  # per recording: cudagraph trees' pool right after it
        orig_enter = torch.cuda.graph.__enter__
        orig_replay = torch.cuda.CUDAGraph.replay
        counting = self

        def enter(self_, *a, **k):
            counting.captures += 1
            return orig_enter(self_, *a, **k)

        def replay(self_, *a, **k):
            counting.replays += 1
            return orig_replay(self_, *a, **k)

        torch.cuda.graph.__enter__ = enter
        torch.cuda.CUDAGraph.replay = replay
        try:
            from torch._inductor import cudagraph_trees as trees

            orig_init = trees.CUDAGraphNode.__init__

            def node_init(self_, *a, **k):
                orig_init(self_, *a, **k)  # records the CUDA graph
                counting.functions.add(self_.wrapped_function.id)
                counting.recorded.append({"function": str(self_.wrapped_function.id), **pool_bytes()})

            trees.CUDAGraphNode.__init__ = node_init
        except Exception:
            pass

    def snapshot(self) -> dict:
        import torch
        from torch._dynamo.utils import counters

        out = {
            "unique_graphs": int(counters["stats"].get("unique_graphs", 0)),
            "graph_breaks": int(sum(counters["graph_break"].values())),
            "break_reasons": {k[:200]: v for k, v in counters["graph_break"].items()},
            "frames_ok": int(counters["frames"].get("ok", 0)),
            "frames_total": int(counters["frames"].get("total", 0)),
            "captures": self.captures,
            "replays": self.replays,
            "functions_graphed": len(self.functions),
            "cudagraph_skips": int(counters["inductor"].get("cudagraph_skips", 0)),
            "recompiles": recompile_reasons(),
        }
        if torch.cuda.is_available():
            out["allocated"] = torch.cuda.memory_allocated()
            out["max_allocated"] = torch.cuda.max_memory_allocated()
            out["reserved"] = torch.cuda.memory_reserved()
            out.update(pool_bytes())
        return out


def pool_bytes() -> dict:
    """The caching allocator's private pools (cudagraph trees' pool; ``torch.cuda.graph``'s): their segments'
    reserved and allocated bytes, read from ``torch.cuda.memory_snapshot()``."""
    import torch

    if not torch.cuda.is_available():
        return {}
    reserved = allocated = 0
    pools = set()
    for seg in torch.cuda.memory_snapshot():
        pid = tuple(seg.get("segment_pool_id") or (0, 0))
        if pid == (0, 0):
            continue
        pools.add(pid)
        reserved += int(seg["total_size"])
        allocated += int(seg["allocated_size"])
    return {"pool_reserved": reserved, "pool_allocated": allocated, "pools": len(pools)}


def recompile_reasons() -> list:
    try:
        from torch._dynamo.utils import guard_failures

        return [str(r)[:300] for rs in guard_failures.values() for r in rs]
    except Exception:
        return []


def sync():
    import torch

    if torch.cuda.is_available():
        torch.cuda.synchronize()


def env_facts() -> dict:
    import platform

    import torch

    facts = {"torch": torch.__version__, "python": platform.python_version(), "device": device()}
    if torch.cuda.is_available():
        facts["gpu"] = torch.cuda.get_device_name(0)
        facts["gpu_total_bytes"] = torch.cuda.get_device_properties(0).total_memory
    try:
        import transformers

        facts["transformers"] = transformers.__version__
    except Exception:
        pass
    return facts


def emit(row: dict) -> None:
    print("TRUTH " + json.dumps(row, default=str), flush=True)


def error_text(e: BaseException) -> str:
    first = str(e).strip().splitlines()[0] if str(e).strip() else ""
    return f"{type(e).__name__}: {first}"[:400]


def _one(script: str, case: str, timeout: float, logdir: str | None) -> dict:
    env = dict(os.environ, TORCH_LOGS=LOGS, PYTHONUNBUFFERED="1")
    t0 = time.time()
    try:
        p = subprocess.run([sys.executable, script, "one", case], capture_output=True, text=True, timeout=timeout,
                           env=env)
        lines = [ln for ln in p.stdout.splitlines() if ln.startswith("TRUTH ")]
        row = json.loads(lines[-1][6:]) if lines else {
            "case": case, "error": "no row: rc={} {}".format(p.returncode, (p.stderr.strip().splitlines() or ["?"])[-1][:300])}
        err = p.stderr
    except subprocess.TimeoutExpired as e:
        row, err = {"case": case, "error": f"timed out after {timeout:.0f} s"}, str(e.stderr or "")
    row["skip_messages"] = sorted({ln.split("due to")[-1].strip()[:200] for ln in err.splitlines()
                                   if "skipping cudagraphs" in ln or "disabling cudagraphs" in ln})
    row["log_warnings"] = sorted({ln.strip()[:300] for ln in err.splitlines()
                                  if "distinct sizes" in ln or "recompile_limit" in ln or "cache_size_limit" in ln
                                  or "re-record" in ln.lower()})[:20]
    row["wall_s"] = round(time.time() - t0, 1)
    if logdir:
        with open(os.path.join(logdir, f"{os.path.basename(script)[:-3]}.{case}.err"), "w") as f:
            f.write(err[-40000:])
    return row


def run_all(script: str, cases: list, out_path: str, jobs: int = 6, timeout: float = 420) -> None:
    logdir = os.path.join(os.path.dirname(os.path.abspath(out_path)), "logs")
    os.makedirs(logdir, exist_ok=True)
    with cf.ThreadPoolExecutor(jobs) as ex, open(out_path, "a") as out:
        futures = {ex.submit(_one, script, c, timeout, logdir): c for c in cases}
        for fut in cf.as_completed(futures):
            row = fut.result()
            out.write(json.dumps(row, default=str) + "\n")
            out.flush()
            last = (row.get("calls") or [row])[-1]
            short = {k: last.get(k) for k in ("unique_graphs", "graph_breaks", "captures", "functions_graphed",
                                               "cudagraph_skips")}
            short["error"] = row.get("error")
            print(f"{os.path.basename(script)} {row.get('case')}: {short}", flush=True)


def main(script: str, cases: list, run_one) -> None:
    if len(sys.argv) >= 3 and sys.argv[1] == "one":
        run_one(sys.argv[2])
    elif len(sys.argv) >= 3 and sys.argv[1] == "all":
        chosen = sys.argv[3:] or cases
        run_all(script, chosen, sys.argv[2], jobs=int(os.environ.get("JOBS", "6")),
                timeout=float(os.environ.get("GT_CASE_TIMEOUT", "420")))
    else:
        print(__doc__ if len(sys.argv) < 2 else f"usage: {script} one CASE | all OUT.jsonl [CASE...]")
        print("cases:", " ".join(cases))
