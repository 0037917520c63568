"""``trace --ddp``'s per-rank prediction against real gloo runs: each rank of 2 and 4 processes says
what it compiled (graphs, distinct graph breaks, the batch its first dynamo graph got), and graphtool's
groups of ranks, predicted in one process with torch's fake process group, say the same for every rank.

``uneven_batch.py`` gives the last rank a smaller batch from ``dist.get_rank()`` in its factory;
``rank0_print.py`` prints under ``if dist.get_rank() == 0`` inside the forward (a graph break on rank 0
only). Real ranks run under ``run_ranks``' deadline and are killed on the way out.
"""

from __future__ import annotations

import json

import pytest

from tests.truth.test_ddp_truth import DDP_FIXTURES, cases, run_ranks

CASES = [("uneven_batch.py", 2), ("uneven_batch.py", 4), ("rank0_print.py", 2), ("rank0_print.py", 4)]


@pytest.mark.slow
@pytest.mark.parametrize("script, world", cases(CASES, lambda r: f"{r[0][:-3]}-ws{r[1]}"))  # ws4: ONE_TORCH
def test_each_rank_compiles_what_graphtool_predicts_for_it(cli, tmp_path, script, world):
    real = run_ranks(DDP_FIXTURES / script, world, 25.0, False, tmp_path)
    rc, out, err = cli("trace", DDP_FIXTURES / script, "--ddp", "--world-size", world, "--format", "json")
    assert rc == 0, err
    ranks = json.loads(out)["ddp"]["ranks"]
    predicted = {r: g for g in ranks["groups"] for r in g["ranks"]}
    assert sorted(predicted) == list(range(world))
    for rank, seen in enumerate(real):
        group = predicted[rank]
        assert group["graphs"] == seen["graphs"], f"rank {rank}"
        assert len(group["graph_breaks"]) == seen["graph_break_reasons"], f"rank {rank}"
        assert [t["shape"] for t in group["inputs"]] == seen["first_input_shapes"], f"rank {rank}"
    # ranks graphtool puts apart really compiled something different, and the others the same
    differs = {rank: (seen["graphs"], seen["graph_break_reasons"], seen["first_input_shapes"]) for rank, seen in enumerate(real)}
    assert ranks["same"] == (len(set(map(str, differs.values()))) == 1)
    assert not ranks["same"]
    (other,) = [g for g in ranks["groups"] if 0 not in g["ranks"]]
    if script == "uneven_batch.py":
        assert other["ranks"] == [world - 1]
        assert "size mismatch at index 0. expected 4, actual 3" in other["why"][0]
    else:
        assert other["ranks"] == list(range(1, world))
        (why,) = other["why"]
        assert why.startswith("rank 0 takes a graph break at ") and f"{script}:17 (`print(\"loss scale ok\")`: " in why
        assert why.endswith("that rank 1 doesn't" if world == 2 else "that ranks 1-3 don't")
