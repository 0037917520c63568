"""The rows of tests/truth/gpu/shapes-{h200,h100}-torch2.11.jsonl (tests/truth/gpu/shapes_truth.py: loops whose
input shapes change, under ``mode="reduce-overhead"``, torch 2.11) against what ``graphtool shapes`` predicts on the
meta stand-in for the same schedules (tests/fixtures/shapes/): per call, the graphs dynamo compiled so far, the CUDA
graphs recorded in the call (``torch.cuda.graph`` entries, cudagraph trees' one pool capture apart), the CUDA graphs
run in it (a recording replays once) and the functions recorded so far; at the end, whether the frame passed
``recompile_limit`` (frames total > ok). These carry the facts of docs/gpu-results.md's "H200, 2026-11-27": a size
is recorded on its 2nd call (its 1st is a warm-up), so the KV decode never records; ``dynamic=False`` stops at 8
graphs and runs later sizes eagerly; automatic dynamic compiles 2 graphs. ``backend="cudagraphs"`` raised at call 3
on both cards (a symbolic length): graphtool predicts the loop fails at that step."""

from __future__ import annotations

import json

import pytest

from tests.analysis.shapes_cases import ROOT, marks, predict


def _rows(card: str) -> dict:
    path = ROOT / "tests" / "truth" / "gpu" / f"shapes-{card}-torch2.11.jsonl"
    return {r["case"]: r for r in (json.loads(line) for line in path.read_text().splitlines() if line.strip())}


ROWS = {"h200": _rows("h200"), "h100": _rows("h100")}
#: (card, case): every row of each card (the H200's second run, 2026-11-27, added cudagraph_capture_sizes, the
#: eager_on_recompile stance and the pool's bytes per recording)
CARD_CASES = [(card, case) for card in ROWS for case in sorted(ROWS[card])]
#: the decoder's cases trace a Llama 2-16 times: over 5 s each on 2 cores
FAST = {"cnn_last_batch.auto", "kv_decode.auto"}
#: where graphtool and the GPU disagree, and why (strict: the test says so once they agree); none now
KNOWN: dict = {}


def _per_call(row: dict) -> list[tuple]:
    calls, out = row["calls"], []
    before = 1 if calls[-1]["captures"] else 0  # the pool's own capture; none where no call reaches the trees
    for c in calls:
        out.append((c["call"], c["unique_graphs"], c["captures"] - before, c["replays_this_call"], c["functions_graphed"]))
        before = c["captures"]
    return out


def _predicted(report, n: int) -> list[tuple]:
    out, compiled, functions = [], 0, 0
    for s in report.per_step[:n]:
        compiled += s.graphs_compiled
        functions += s.recordings  # every recording here is of a new function (a new size or graph)
        out.append((s.step, compiled, s.recordings, s.recordings + s.replays, functions))
    return out


def _marks(card: str, case: str) -> list:
    known = KNOWN.get((card, case))
    return marks(*case.split("."), case in FAST) + ([pytest.mark.xfail(reason=known, strict=True)] if known else [])


@pytest.mark.parametrize("card, case", [pytest.param(k, c, marks=_marks(k, c), id=f"{c}-{k}") for k, c in CARD_CASES])
def test_each_call_agrees_with_the_gpu(case, card):
    row = ROWS[card][case]
    model, variant = case.split(".")
    report = predict(model, variant)
    n = len(row["calls"])
    if row["error"]:  # backend="cudagraphs" over a symbolic length: torch raised in call n
        assert report.failed and report.failed.startswith(f"step {n} fails"), report.failed
        assert _predicted(report, n - 1) == _per_call(row)[: n - 1]
        return
    assert report.steps == n
    assert _predicted(report, n) == _per_call(row)
    assert report.captures == row["calls"][-1]["captures"]
    if "recorded" in row["calls"][0]:
        assert _pool_after(report, n, exact_only=True) == _pool_measured(row, exact_only=_graphs(report, n))
    limit_hit = row["frames"]["total"] > row["frames"]["ok"]
    assert (report.limit_step is not None) == limit_hit
    if limit_hit:
        eager = [s.step for s in report.per_step if s.eager]
        assert report.recompile_limit == row["recompile_limit"] == 8
        # sizes compiled before the limit still run their graphs; new sizes run eagerly
        assert all(c["unique_graphs"] == 8 for c in row["calls"][eager[0] - 1:])


def _graphs(report, n: int) -> list[list[str]]:
    return [[g for g, _own, _live in s.pool] for s in report.per_step[:n]]


def _pool_after(report, n: int, exact_only: bool) -> list[list]:
    """Per step, the bytes live in cudagraph trees' pool right after each recording, as graphtool predicts them.
    ``exact_only``: the inference and backward recordings (a forward's saved activations are the partitioner's on
    the stand-in; inductor's kernels on the GPU save other sets: docs/gpu-results.md)."""
    return [[live for g, _own, live in s.pool if not (exact_only and g == "forward")] for s in report.per_step[:n]]


def _pool_measured(row: dict, exact_only: list[list[str]]) -> list[list]:
    """Per call, ``torch.cuda.memory_snapshot()``'s private-pool allocated bytes right after each recording, the
    forward recordings left out where graphtool's are."""
    out = []
    for c, graphs in zip(row["calls"], exact_only):
        rec = c["recorded"]
        assert len(rec) == len(graphs), (c["call"], rec, graphs)
        out.append([r["pool_allocated"] for r, g in zip(rec, graphs) if g != "forward"])
    return out


def test_a_size_records_on_its_second_call_so_a_growing_cache_never_records():
    report = predict("kv_decode", "auto")
    assert report.recordings == 0 and report.captures == 1  # the pool's capture only
    assert all(s.warmups == 1 for s in report.per_step)
