"""GPU ground truth for issue 35: cudagraph trees' private pool under ``mode="reduce-overhead"``, allocation by
allocation, for graphtool's caching-allocator simulation (graphtool/analysis/memory/allocator.py) and its
reduce-overhead estimate (graphtool/analysis/memory/pool_step.py).

  python pool_traces.py OUT.json.gz       every case, each in a fresh process (JOBS at once), one file

A case is MODEL.BUDGET: tests/fixtures/fit/{mlp,decoder,cnn}.py compiled with ``mode="reduce-overhead"`` at
``torch._functorch.config.activation_memory_budget`` 1.0, 0.5 or 0.1, three training steps (warm-up, recording,
replay) under ``torch.cuda.memory._record_memory_history``. Kept per case: the allocations and frees that landed
in the pool, in order, as ``[op, block id, bytes, stream index]`` (``a`` alloc, ``f`` free_completed; events at an
address before the pool's segment there was allocated are another segment's and left out), the pool's segments
and their total (``torch.cuda.memory._snapshot()``'s segments whose ``segment_pool_id`` is not (0, 0)).
"""

from __future__ import annotations

import bisect
import gzip
import json
import os
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

CASES = [f"{m}.{b}" for m in ("mlp", "decoder", "cnn") for b in ("1.0", "0.5", "0.1")]


def pool_events(segments: list, trace: list) -> tuple[list, list]:
    pool = sorted((s["address"], s["address"] + s["total_size"]) for s in segments
                  if tuple(s.get("segment_pool_id") or (0, 0)) != (0, 0))
    starts = [p[0] for p in pool]
    born = {e["addr"]: i for i, e in enumerate(trace) if e["action"] == "segment_alloc"}
    live, streams, rows, n = {}, {}, [], 0
    for i, e in enumerate(trace):
        j = bisect.bisect_right(starts, e["addr"]) - 1
        if j < 0 or e["addr"] >= pool[j][1] or i < born.get(pool[j][0], -1):
            continue
        s = streams.setdefault(e.get("stream", 0), len(streams))
        if e["action"] == "alloc":
            live[e["addr"]] = n
            rows.append(["a", n, e["size"], s])
            n += 1
        elif e["action"] == "free_completed" and e["addr"] in live:
            rows.append(["f", live.pop(e["addr"]), e["size"], s])
    return pool, rows


def one(case: str, out: str) -> None:
    import torch
    from memory_truth import load, loss_of

    name, b = case.split(".", 1)
    model, args, kwargs, opt, path = load(name, "cuda")
    torch._functorch.config.activation_memory_budget = float(b)
    fn = torch.compile(model, mode="reduce-overhead")
    torch.cuda.memory._record_memory_history(enabled="all", context=None, stacks="python", max_entries=200000)
    for _ in range(3):
        torch.compiler.cudagraph_mark_step_begin()
        result = fn(*args, **kwargs)
        loss, _ = loss_of(result)
        loss.backward()
        result = loss = None  # held through the backward, as memory_truth.py's step holds them
        opt.step()
        opt.zero_grad(set_to_none=True)
    torch.cuda.synchronize()
    snap = torch.cuda.memory._snapshot()
    torch.cuda.memory._record_memory_history(enabled=None)
    pool, rows = pool_events(snap["segments"], [e for dt in snap["device_traces"] for e in dt])
    doc = {"script": path, "budget": float(b), "torch": torch.__version__, "gpu": torch.cuda.get_device_name(0),
           "pool_reserved": sum(e - s for s, e in pool), "segments": sorted((e - s for s, e in pool), reverse=True),
           "events": rows}
    with open(out, "w") as f:
        json.dump(doc, f)


def main() -> None:
    if sys.argv[1] == "one":
        return one(sys.argv[2], sys.argv[3])
    target, tmp = sys.argv[1], tempfile.mkdtemp()
    pending, running = list(CASES), []
    while pending or running:
        while pending and len(running) < int(os.environ.get("JOBS", 4)):
            c = pending.pop(0)
            running.append(subprocess.Popen([sys.executable, __file__, "one", c, os.path.join(tmp, c + ".json")]))
        time.sleep(1)
        running = [p for p in running if p.poll() is None]
    cases = {}
    for c in CASES:
        try:
            with open(os.path.join(tmp, c + ".json")) as f:
                cases[c] = json.load(f)
        except OSError:
            cases[c] = {"error": "no result (the case failed or ran out of time)"}
    with gzip.open(target, "wt") as f:
        json.dump({"about": __doc__.split("\n\n")[0].replace("\n", " "), "date": time.strftime("%Y-%m-%d"),
                   "cases": cases}, f, separators=(",", ":"))


if __name__ == "__main__":
    main()
