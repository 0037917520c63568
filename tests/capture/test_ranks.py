"""``trace --ddp``'s ranks: the world size and rank a script sees, which ranks graphtool traces, and
what it says when a rank fails or hangs. tests/truth/test_rank_truth.py compares the per-rank
prediction with real gloo runs."""

from __future__ import annotations

import json

import pytest

from graphtool.capture.distributed.ranks import RankSignature, TensorSig, ranks_to_trace, reads_rank
from tests.helpers import FIXTURES

DDP_FIXTURES = FIXTURES / "ddp"

#: graphtool's own code over facts a sibling checks on every torch (exit codes, error text, tables, deadlines):
#: the pinned torch only (docs/ci.md)
ONE_TORCH = pytest.mark.one_torch


def _sig(rank: int, rows: int = 4, read_rank: bool = False) -> RankSignature:
    return RankSignature(rank, (TensorSig("x", (rows, 8), "float32", False),), (("w", (8, 8)),), (":Linear",), read_rank)


def test_a_script_reading_the_world_size_sees_the_one_asked_for(cli):
    # world_sized.py: a batch of 32 // dist.get_world_size() rows
    rc, out, err = cli("trace", DDP_FIXTURES / "world_sized.py", "--ddp", "--world-size", "8", "--format", "json")
    assert rc == 0, err
    doc = json.loads(out)
    assert [p["shape"] for p in doc["graphs"][0]["forward"]["placeholders"] if p["kind"] != "parameter"] == [[4, 16]]
    ranks = doc["ddp"]["ranks"]
    # the script reads no rank, and every rank's batch is 4 rows: rank 0 alone is traced
    assert ranks["same"] and ranks["traced"] == [0] and ranks["groups"][0]["ranks"] == list(range(8))
    assert ranks["built"] == [0, 1] and ranks["notes"][0].startswith("the script never reads its rank")


@ONE_TORCH
def test_every_rank_the_same_says_so_in_the_table(cli):
    rc, out, err = cli("trace", DDP_FIXTURES / "mlp8.py", "--ddp", "--world-size", "8")
    assert rc == 0, err
    assert "ranks: every rank compiles the same graphs (2 of 8 built, 1 traced)" in out
    assert len(next(line for line in out.splitlines() if "ranks: " in line)) <= 80


def test_an_uneven_last_batch_is_named_with_dynamo_s_guard(cli):
    rc, out, err = cli("trace", DDP_FIXTURES / "uneven_batch.py", "--ddp", "--world-size", "8")
    assert rc == 0, err
    assert "ranks: 2 different compiles among 8 ranks" in out
    assert "ranks 0-6: 2 graphs, 0 graph breaks" in out and "rank 7: 2 graphs, 0 graph breaks" in out
    flat = " ".join(line.strip() for line in out.splitlines())
    assert "rank 7's input 'input' is 3x512 (rank 0's 4x512): it compiles its own graphs; dynamo's guard:" in flat
    assert "size mismatch at index 0. expected 4, actual 3" in flat
    # it reads its rank: rank 0, rank 1 and the last rank are traced, the others taken as rank 1
    assert "traced ranks 0, 1, 7; ranks 2-6 not traced" in flat
    ours = out[out.index("  ranks: "):].splitlines()[:-1]  # the ranks' lines, before trace's summary line
    assert max(len(line) for line in ours) <= 80


@ONE_TORCH
def test_a_script_failing_on_one_rank_exits_2_naming_the_rank_and_the_line(cli):
    rc, out, err = cli("trace", DDP_FIXTURES / "raise_on_rank.py", "--ddp", "--world-size", "4")
    assert rc == 2 and out == ""
    assert "rank 3 of 4: " in err and "raise_on_rank.py:9: get_distributed_model() raised: FileNotFoundError: shard-3.pt" in err


@ONE_TORCH
@pytest.mark.slow
def test_a_rank_whose_factory_hangs_is_stopped_by_timeout_naming_the_rank(cli):
    rc, out, err = cli("trace", DDP_FIXTURES / "hang_on_rank.py", "--ddp", "--world-size", "4", "--timeout", "30")
    assert rc == 2 and out == ""
    assert "rank 1 of 4: " in err and "hang_on_rank.py:11: still running after 30 s (--timeout 30)" in err
    import torch.distributed as dist

    assert not dist.is_initialized()  # the fake group of the stopped rank is gone


@ONE_TORCH
def test_ranks_to_trace_takes_one_of_each_signature_and_the_edges_when_the_rank_is_read():
    same = [_sig(r) for r in range(8)]
    assert ranks_to_trace(same, reads_rank=False) == []
    assert ranks_to_trace(same, reads_rank=True) == [1, 7]
    uneven = [_sig(r, 3 if r == 5 else 4) for r in range(8)]
    assert ranks_to_trace(uneven, reads_rank=False) == [5]
    # a factory that asked for its rank while building counts as reading it
    assert ranks_to_trace([_sig(0, read_rank=True), _sig(1)], reads_rank=False) == [1]


@ONE_TORCH
def test_reads_rank_finds_get_rank_and_the_rank_variable_without_importing():
    assert reads_rank(str(DDP_FIXTURES / "rank0_print.py")) == (16,)
    assert reads_rank(str(DDP_FIXTURES / "mlp8.py")) == ()


def test_world_size_one_is_one_rank_the_same(cli):
    rc, out, err = cli("trace", DDP_FIXTURES / "mlp8.py", "--ddp", "--world-size", "1", "--format", "json")
    assert rc == 0, err
    assert json.loads(out)["ddp"]["ranks"]["groups"][0]["ranks"] == [0]


def test_ranks_json_follows_the_schema(cli):
    jsonschema = pytest.importorskip("jsonschema")
    from importlib import resources

    rc, out, err = cli("trace", DDP_FIXTURES / "uneven_batch.py", "--ddp", "--world-size", "4", "--format", "json")
    assert rc == 0, err
    doc = json.loads(out)
    assert [g["ranks"] for g in doc["ddp"]["ranks"]["groups"]] == [[0, 1, 2], [3]]
    jsonschema.validate(doc, json.loads(resources.files("graphtool.schema").joinpath("report.schema.json").read_text()))
