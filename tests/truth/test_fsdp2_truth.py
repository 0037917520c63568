"""``trace --fsdp2`` against real FSDP2 runs: gloo process groups of 2 and 4 processes on this CPU.

Each rank (``models/fsdp2_rank.py``) applies ``fully_shard`` as graphtool's convention does, compiles
the model, runs a step and its optimizer's step, then a second step under torch's ``CommDebugMode``,
and reports what torch itself says: the graphs the backend was handed, dynamo's graph-break reasons,
its own shards, gradients and optimizer state in bytes, the most unsharded parameter bytes FSDP2
held at once, and every c10d collective with its sizes. graphtool predicts all of it from one
process, rank 0 of a fake process group. The next block's all-gather buffer in flight (part of the
all-gather peak) and the CUDA-graph verdict are not measured on CPU (the verdict was measured on an
H200 for one model: tests/analysis/test_dist_gpu_agreement.py): the report says so
(``predicted_only``), and the test checks that it does. ``memory --fsdp2``'s per-rank rows, saved
activations included, are compared with the same real ranks.
"""

from __future__ import annotations

import json
import os
import time
from collections import Counter
from pathlib import Path

import pytest

from tests.helpers import FIXTURES
from tests.truth.test_ddp_truth import cases, shared, spawn_ranks

RANK = Path(__file__).parent / "models" / "fsdp2_rank.py"
BLOCKS = FIXTURES / "fsdp2" / "blocks.py"
#: c10d's op -> graphtool's name for it
OPS = {"c10d::_allgather_base_": "all_gather", "c10d::_reduce_scatter_base_": "reduce_scatter",
       "c10d::allreduce_": "all_reduce"}


def run_ranks(script: Path, world: int, tmp_path_factory) -> list[dict]:
    """Run ``world`` real ranks of ``models/fsdp2_rank.py`` and return each one's report: once per
    (script, world) in this process, shared by the tests of that case (blocks-ws4: the facts and the memory
    test; tests/conftest.py keeps them on one worker)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(Path(__file__).parents[2]), os.environ.get("PYTHONPATH", "")])}
    return shared(("fsdp2", script.name, world), tmp_path_factory, lambda tmp: spawn_ranks(
        lambda rank, out: [str(RANK), str(script), str(rank), str(world), str(tmp / "store"), out], world, tmp, env))


def predict(cli, script: Path, world: int) -> dict:
    rc, out, err = cli("trace", script, "--fsdp2", "--world-size", world, "--backend", "aot_eager", "--format", "json")
    assert rc == 0, err
    doc = json.loads(out)
    return doc[0] if isinstance(doc, list) else doc


CASES = [("blocks.py", 2), ("blocks.py", 4), ("per_block.py", 2)]


@pytest.mark.slow
@pytest.mark.parametrize("script, world", cases(CASES, lambda r: f"{r[0][:-3]}-ws{r[1]}"))  # ws4: ONE_TORCH
def test_predicted_fsdp2_facts_equal_every_rank_of_a_real_gloo_run(cli, tmp_path_factory, script, world):
    ranks = run_ranks(FIXTURES / "fsdp2" / script, world, tmp_path_factory)
    doc = predict(cli, FIXTURES / "fsdp2" / script, world)
    fsdp = doc["fsdp2"]
    assert fsdp["world_size"] == world
    for rank, real in enumerate(ranks):
        # graphs: as many as every rank compiled, and the same ones on every rank
        assert real["graphs"] == ranks[0]["graphs"]
        assert fsdp["same_graphs_on_every_rank"] is True
        assert fsdp["graph_count"] == len(real["graphs"]) == real["unique_graphs"] == len(doc["graphs"])
        assert len(fsdp["graph_breaks"]) == len(real["break_reasons"])
        # memory on this rank
        mem = fsdp["memory"][rank]
        assert mem["rank"] == rank
        assert mem["params_unpadded"] == real["params_unpadded"]
        assert mem["params"] == real["params_padded"]
        assert mem["grads"] == real["grads"]
        assert mem["optimizer"] == real["optimizer"]
        assert mem["unsharded_peak"] == real["unsharded_peak"]
        # collectives per step: torch's CommDebugMode counts, the dispatcher's sizes
        counted = Counter()
        for op, n in real["comm_counts"].items():
            counted[OPS[op.replace(".", "::", 1)]] += n
        predicted = Counter()
        for e in fsdp["eager_collectives"]:
            predicted[e["op"]] += e["count"]
        assert predicted == counted
        real_sizes = Counter((OPS[name], sizes[0], sizes[1]) for name, sizes in real["calls"])
        # c10d's in-place ops take (output, input): what the rank receives, then what it sends
        predicted_sizes = Counter()
        for e in fsdp["eager_collectives"]:
            predicted_sizes[(e["op"], e["received_bytes"], e["sent_bytes"])] += e["count"]
        assert predicted_sizes == real_sizes
    assert fsdp["collectives_in_graphs"] == []
    assert any("all-gather peak" in p for p in fsdp["predicted_only"])
    assert any("CUDA" in p for p in fsdp["predicted_only"])


def test_world_size_8_is_predicted_in_one_process(cli):
    """No real run here: 8 ranks on a 2-core machine is what the prediction is for."""
    started = time.monotonic()
    fsdp = predict(cli, BLOCKS, 8)["fsdp2"]
    assert [m["rank"] for m in fsdp["memory"]] == list(range(8))
    # 250 rows over 8 ranks: 32 rows each, the last rank 26; every rank allocates the padded 32
    assert len({m["params"] for m in fsdp["memory"]}) == 1
    assert fsdp["memory"][7]["params_unpadded"] < fsdp["memory"][0]["params_unpadded"]
    assert time.monotonic() - started < 60


MEMORY_CASES = [("blocks512.py", 2), ("blocks.py", 4)]


@pytest.mark.slow
@pytest.mark.parametrize("script, world", cases(MEMORY_CASES, lambda r: f"{r[0][:-3]}-ws{r[1]}"))
def test_memory_fsdp2_per_rank_equals_every_rank_of_a_real_gloo_run(cli, tmp_path_factory, script, world):
    """``memory --fsdp2``'s per-rank rows: shards, gradients, optimizer state and the compiled graphs'
    saved activations (each graph once per block it serves) against what each real rank holds (the
    ``CompiledFunctionBackward`` nodes' saved tensors; blocks.py's head runs eagerly and is in neither)."""
    ranks = run_ranks(FIXTURES / "fsdp2" / script, world, tmp_path_factory)
    rc, out, err = cli("memory", FIXTURES / "fsdp2" / script, "--fsdp2", "--world-size", world, "--backend",
                       "aot_eager", "--format", "json")
    assert rc == 0, err
    doc = json.loads(out)
    rank_memory = doc["rank_memory"]
    assert rank_memory["rank"] == 0 and len(rank_memory["per_rank"]) == world
    for rank, real in enumerate(ranks):
        row = rank_memory["per_rank"][rank]
        assert row["rank"] == rank and row["bucket_bytes"] == 0
        assert row["params_bytes"] == real["params_padded"]
        assert row["grads_bytes"] == real["grads"]
        assert row["optimizer_bytes"] == (real["optimizer"] or 0)
        assert row["activations_bytes"] == real["saved_activations"] > 0
        assert doc["fsdp2"]["memory"][rank]["unsharded_peak"] == real["unsharded_peak"]
    top = max(rank_memory["per_rank"], key=lambda r: r["total_bytes"])
    assert rank_memory["total_bytes"] == top["total_bytes"]
