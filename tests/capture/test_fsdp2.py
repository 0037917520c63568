"""``--fsdp2``: what fully_shard does to the compiled graphs, predicted in one process (a fake group)."""

import json

import pytest

from tests.helpers import FIXTURES

FSDP2 = FIXTURES / "fsdp2"
DDP = FIXTURES / "ddp"

#: graphtool's own code over facts a sibling checks on every torch (exit codes, error text, tables, deadlines):
#: the pinned torch only (docs/ci.md)
ONE_TORCH = pytest.mark.one_torch


def _trace(cli, script, *args):
    rc, out, err = cli("trace", script, "--fsdp2", "--backend", "aot_eager", "--format", "json", *args)
    assert rc == 0, err
    return json.loads(out)


def test_units_are_the_blocks_and_the_root_and_the_report_fits_the_schema(cli):
    doc = _trace(cli, FSDP2 / "blocks.py", "--world-size", "4")
    fsdp = doc["fsdp2"]
    assert [u["module"] for u in fsdp["units"]] == ["", "layers.0", "layers.1", "layers.2", "layers.3"]
    block = fsdp["units"][1]
    # 250 rows over 4 ranks: 63 rows each (padded), l2's 64 rows: 16
    assert block["shard_bytes"] == (63 * 64 + 63 + 16 * 250 + 16) * 4
    assert block["allgather_bytes"] == 4 * block["shard_bytes"]
    assert fsdp["graph_count"] == len(doc["graphs"]) == 2
    (brk,) = fsdp["graph_breaks"]
    assert brk["skips_frame"] and brk["user_source"]["file"].endswith("blocks.py")
    assert "fsdp" in brk["torch_source"]["file"]
    assert fsdp["optimizer"] == "Adam"
    jsonschema = pytest.importorskip("jsonschema")
    from importlib import resources

    jsonschema.validate(doc, json.loads(resources.files("graphtool.schema").joinpath("report.schema.json").read_text()))


def test_a_script_that_shards_its_own_model_is_traced_as_given(cli):
    fsdp = _trace(cli, FSDP2 / "own_shard.py", "--world-size", "8")["fsdp2"]
    assert "get_distributed_model" in fsdp["wrapper"]
    assert [u["module"] for u in fsdp["units"]] == ["", "0"]
    assert fsdp["optimizer"] is None and fsdp["memory"][0]["optimizer"] is None


@ONE_TORCH
@pytest.mark.parametrize("args, expected", [
    (["--world-size", "0"], "--world-size 0: a process group needs at least one rank"),
    (["--device", "meta"], "--fsdp2 cannot run on --device meta"),
    (["--ddp"], "--fsdp2 with --ddp"),
])
def test_bad_fsdp2_options_exit_2(cli, args, expected):
    rc, out, err = cli("trace", FSDP2 / "blocks.py", "--fsdp2", *args)
    assert rc == 2 and out == ""
    assert expected in err


@ONE_TORCH
def test_a_model_wrapped_in_ddp_exits_2(cli):
    rc, out, err = cli("trace", DDP / "wrapped.py", "--fsdp2")
    assert rc == 2 and out == ""
    assert "wrapped.py:7: --fsdp2: the script's model is a DistributedDataParallel" in err


@ONE_TORCH
def test_a_script_starting_its_own_process_group_exits_2_with_a_hint(cli):
    import torch.distributed as dist

    rc, out, err = cli("trace", DDP / "own_group.py", "--fsdp2")
    assert rc == 2 and out == ""
    assert "own_group.py:6" in err and "with --fsdp2 graphtool starts the process group itself" in err
    assert not dist.is_initialized()


def test_lint_fsdp2_counts_the_graphs_and_the_skipped_root(cli):
    rc, out, err = cli("lint", FSDP2 / "blocks.py", "--fsdp2", "--world-size", "4", "--format", "json")
    assert rc == 0, err
    model = json.loads(out)["models"][0]
    assert model["graph_count"] == 2 and model["graph_break_count"] == 1


@pytest.mark.slow  # over 6 s: the slow tier (docs/ci.md)
def test_lint_fsdp2_budget_fails_on_the_break(cli):
    rc, out, err = cli("lint", FSDP2 / "blocks.py", "--fsdp2", "--max-graph-breaks", "0", "--format", "json")
    assert rc == 1, err


@pytest.mark.slow  # over 6 s: the slow tier (docs/ci.md)
def test_blocks_the_script_compiled_itself_are_recorded_by_trace_and_lint(cli):
    fsdp = _trace(cli, FSDP2 / "per_block.py", "--world-size", "4")["fsdp2"]
    assert fsdp["graph_count"] == 2  # tests/truth/test_fsdp2_truth.py: what real ranks compile
    assert any("the script compiled 3 module(s) itself (module.compile(), first: layers.0)" in n for n in fsdp["notes"])
    rc, out, err = cli("lint", FSDP2 / "per_block.py", "--fsdp2", "--format", "json")
    assert rc == 0, err
    assert json.loads(out)["models"][0]["graph_count"] == 2


def test_graph_inputs_are_the_blocks_parameters_never_a_stale_name(cli):
    """FSDP2 replaces the parameters (fully_shard) and swaps in unsharded ones while a block runs:
    a name kept by id from before could land on a new tensor that reuses the id."""
    doc = _trace(cli, FSDP2 / "blocks.py")
    for graph in doc["graphs"]:
        params = [p["name"] for p in graph["forward"]["placeholders"] if p["kind"] == "parameter"]
        assert params == ["layers.*.l1.weight", "layers.*.l1.bias", "layers.*.l2.weight", "layers.*.l2.bias"]


def test_inference_holds_no_gradients_and_no_optimizer_state(cli):
    fsdp = _trace(cli, FSDP2 / "blocks.py", "--inference")["fsdp2"]
    assert {(m["grads"], m["optimizer"]) for m in fsdp["memory"]} == {(0, None)}
    assert {e["op"] for e in fsdp["eager_collectives"]} == {"all_gather"}  # no backward: no reduce-scatter


# --- cudagraphs --fsdp2: the steady-state steps under FSDP2 on the meta stand-in ---------------------

def _schema_validates(doc, key=None) -> None:
    """The whole trace document, or (``cudagraphs``: not a trace report) its ``key`` part."""
    jsonschema = pytest.importorskip("jsonschema")
    from importlib import resources

    schema = json.loads(resources.files("graphtool.schema").joinpath("report.schema.json").read_text())
    jsonschema.validate(doc[key] if key else doc, schema["properties"][key] if key else schema)


def test_cudagraphs_fsdp2_judges_each_block_graph_and_validates(cli):
    rc, out, err = cli("cudagraphs", FSDP2 / "blocks.py", "--fsdp2", "--world-size", "4", "--format", "json")
    assert rc == 0, err
    doc = json.loads(out)
    doc = doc[0] if isinstance(doc, list) else doc
    fsdp = doc["fsdp2"]
    assert fsdp["world_size"] == 4 and fsdp["graph_count"] == 2
    # block 0's graph, then the recompile on requires_grad the other three share: each call is a CUDA graph
    assert [(g["region"], g["runs_per_step"], g["cudagraphs"]["cudagraphed"]) for g in fsdp["graphs"]] == [
        (0, 1, True), (1, 3, True)]
    steady = doc["cudagraphs"]["steady_state"]
    assert steady["functions_graphed"] == 4 and steady["per_step"][-1]["replays"] == 8
    # the collectives of one step, though three ran: 2 all-gathers (forward, backward) and 1 reduce-scatter per block
    counts = {(e["unit"], e["op"]): e["count"] for e in fsdp["eager_collectives"]}
    assert counts[("layers.2", "all_gather")] == 2 and counts[("layers.2", "reduce_scatter")] == 1
    assert fsdp["optimizer"] == "Adam" and fsdp["memory"][0]["optimizer"] > 0  # Adam's step on meta DTensors
    assert any("8 CUDA graphs per step from 2 compiled graphs" in n for n in fsdp["notes"])
    _schema_validates(doc, "fsdp2")


@ONE_TORCH
def test_cudagraphs_fsdp2_table_gives_each_graph_its_verdict_at_80_columns(cli):
    rc, out, err = cli("cudagraphs", FSDP2 / "per_block.py", "--fsdp2", "--world-size", "2")
    assert rc == 0, err
    assert "under FSDP2 (2 ranks): 2 compiled graphs" in out
    assert "  graph 1 (2x per step): CUDA graphs applied (forward, backward)" in out
    assert "the script compiled 3 module(s) itself" in " ".join(out.split())
    fsdp_view = out[out.index("under FSDP2"):].splitlines()
    assert max(len(line) for line in fsdp_view) <= 80


def test_trace_fsdp2_cudagraphs_gives_each_graph_its_verdict(cli):
    doc = _trace(cli, FSDP2 / "blocks.py", "--cudagraphs", "inductor")
    assert doc["cudagraphs"]["eligible"] is True
    assert [g["runs_per_step"] for g in doc["fsdp2"]["graphs"]] == [1, 3]
    _schema_validates(doc)


@ONE_TORCH
@pytest.mark.parametrize("args, expected", [
    (["--world-size", "0"], "--world-size 0: a process group needs at least one rank"),
    (["--device", "meta"], "--fsdp2 cannot run on --device meta"),
    (["--ddp"], "--fsdp2 with --ddp"),
])
def test_bad_cudagraphs_fsdp2_options_exit_2(cli, args, expected):
    rc, out, err = cli("cudagraphs", FSDP2 / "blocks.py", "--fsdp2", *args)
    assert rc == 2 and out == ""
    assert expected in err
