"""``--ddp``: the graphs DDP(torch.compile(model)) hands the backend, predicted in one process."""

from __future__ import annotations

import json

import pytest

from tests.helpers import FIXTURES

DDP_FIXTURES = FIXTURES / "ddp"

#: graphtool's own code over facts a sibling checks on every torch (exit codes, error text, tables, deadlines):
#: the pinned torch only (docs/ci.md)
ONE_TORCH = pytest.mark.one_torch


def _ddp(cli, script, *args):
    rc, out, err = cli("trace", DDP_FIXTURES / script, "--ddp", "--format", "json", *args)
    assert rc == (1 if script == "unused.py" else 0), err  # unused.py fails DDP's second step: a finding
    return json.loads(out)["ddp"]


@pytest.mark.slow
def test_bucket_cap_decides_the_splits_of_the_unused_parameter_model(cli):
    # 4 used Linear(512, 512), 1 MiB + 2 KiB each; the unused one is in no graph and no bucket
    small = _ddp(cli, "unused.py", "--bucket-cap-mb", "1", "--world-size", "8")
    assert small["world_size"] == 8 and small["graph_count"] == 4 and small["dynamo_graphs"] == 1
    assert [g["params"] for g in small["graphs"]] == [[f"used.{i}.weight", f"used.{i}.bias"] for i in range(4)]
    assert [g["bytes"] for g in small["graphs"]] == [512 * 513 * 4] * 4
    assert [g["module"] for g in small["graphs"]] == [f"used.{i}" for i in range(4)]
    assert {c["bucket_cap_mb"]: c["graphs"] for c in small["graphs_at_bucket_cap_mb"]}[1.0] == 4
    assert small["collectives"] == []
    default = _ddp(cli, "unused.py")
    # DDPOptimizer fills buckets from the last layer back: the first bucket (1 MiB) takes the last layer
    assert [sorted(g["params"]) for g in default["graphs"]] == [
        sorted(f"used.{i}.{k}" for i in range(3) for k in ("weight", "bias")), ["used.3.bias", "used.3.weight"]]
    assert {c["bucket_cap_mb"]: c["graphs"] for c in default["graphs_at_bucket_cap_mb"]} == {
        1.0: 4, 5.0: 2, 10.0: 2, 25.0: 2, 50.0: 2, 100.0: 2}


def test_split_graphs_are_regions_of_the_trace_with_their_parameters_named(cli):
    rc, out, err = cli("trace", DDP_FIXTURES / "unused.py", "--ddp", "--bucket-cap-mb", "1", "--format", "json")
    assert rc == 1, err  # the unused parameter fails DDP's second step: a finding
    doc = json.loads(out)
    assert [g["region"] for g in doc["graphs"]] == [0, 1, 2, 3]
    names = [[p["name"] for p in g["forward"]["placeholders"] if p["kind"] == "parameter"] for g in doc["graphs"]]
    assert names == [[f"used.{i}.weight", f"used.{i}.bias"] for i in range(4)]
    assert doc["graphs"][0]["forward"]["placeholders"][0]["kind"] == "user_input"
    jsonschema = pytest.importorskip("jsonschema")
    from importlib import resources

    jsonschema.validate(doc, json.loads(resources.files("graphtool.schema").joinpath("report.schema.json").read_text()))


@ONE_TORCH
def test_table_shows_each_split_and_the_other_caps(cli):
    rc, out, err = cli("trace", DDP_FIXTURES / "unused.py", "--ddp", "--bucket-cap-mb", "1", "--find-unused-parameters")
    assert rc == 0, err
    assert "under DDP (2 ranks, bucket_cap_mb=1): 4 graphs from 1 dynamo graph" in out
    assert "region 3: bucket 3, 2 params, 1.0 MB, module used.3" in out
    assert "unused.py:13" in out  # the line of the user's code where the split falls
    assert "graphs at bucket_cap_mb 1: 4, 5: 2, 10: 2, 25: 2, 50: 2, 100: 2" in out


@ONE_TORCH
@pytest.mark.parametrize("args, expected", [
    (["--world-size", "0"], "--world-size 0: a process group needs at least one rank"),
    (["--device", "meta"], "--ddp cannot run on --device meta"),
    (["--bucket-cap-mb", "0.5"], "bucket_cap_mb=0.5) fails in torch's DDPOptimizer"),
])
def test_bad_ddp_options_exit_2(cli, args, expected):
    rc, out, err = cli("trace", DDP_FIXTURES / "mlp8.py", "--ddp", *args)
    assert rc == 2 and out == ""
    assert expected in err


@ONE_TORCH
def test_a_model_already_wrapped_in_ddp_exits_2_naming_the_factory(cli):
    rc, out, err = cli("trace", DDP_FIXTURES / "wrapped.py", "--ddp")
    assert rc == 2 and out == ""
    assert "wrapped.py:7: --ddp: the script's model is already a DistributedDataParallel" in err


@ONE_TORCH
def test_a_script_starting_its_own_process_group_exits_2_with_a_hint(cli):
    import torch.distributed as dist

    rc, out, err = cli("trace", DDP_FIXTURES / "own_group.py", "--ddp")
    assert rc == 2 and out == ""
    assert "own_group.py:6" in err and "trying to initialize the default process group twice" in err
    assert "with --ddp graphtool starts the process group itself" in err
    assert not dist.is_initialized()  # graphtool's own group is gone too


def test_lint_ddp_counts_the_split_graphs_and_the_break(cli):
    rc, out, err = cli("lint", DDP_FIXTURES / "break_mid.py", "--ddp", "--bucket-cap-mb", "1", "--format", "json")
    assert rc == 0, err
    model = json.loads(out)["models"][0]
    assert model["graph_count"] == 6 and model["graph_break_count"] == 1
    assert model["breaks"][0]["line"] == 14


@ONE_TORCH
def test_lint_ddp_refuses_an_already_wrapped_model(cli):
    rc, out, err = cli("lint", DDP_FIXTURES / "wrapped.py", "--ddp", "--format", "json")
    assert rc == 2
    assert "wrapped.py:7: --ddp: the script's model is already a DistributedDataParallel" in json.loads(out)["models"][0]["error"]


@ONE_TORCH
@pytest.mark.slow
def test_a_stuck_rank_under_lint_ddp_times_out_and_is_killed(cli, tmp_path, monkeypatch):
    import os
    import time

    pidfile = tmp_path / "pid"
    monkeypatch.setenv("GRAPHTOOL_TEST_PIDFILE", str(pidfile))
    rc, out, err = cli("lint", DDP_FIXTURES / "stuck_rank.py", "--ddp", "--timeout", "20", "--format", "json")
    assert rc == 2
    assert "timed out after 20 s" in json.loads(out)["models"][0]["error"]
    pid = int(pidfile.read_text())
    time.sleep(0.2)
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


def test_get_distributed_model_gets_the_world_size(cli):
    ddp = _ddp(cli, "factory.py", "--world-size", "3", "--bucket-cap-mb", "1")
    assert ddp["wrapper"] == "DDP(torch.compile(model))"
    assert [g["params"] for g in ddp["graphs"]] == [[f"{i}.weight", f"{i}.bias"] for i in range(3)]


def test_a_factory_returning_ddp_is_traced_as_torch_compile_of_ddp(cli):
    rc, out, err = cli("trace", DDP_FIXTURES / "compiled_ddp.py", "--ddp", "--format", "json")
    assert rc == 0, err
    doc = json.loads(out)
    # dynamo skips DDP's forward (seen on torch 2.13; tests/truth/test_ddp_truth.py checks a real run)
    assert doc["ddp"]["wrapper"] == "torch.compile(DDP(model))" and doc["ddp"]["bucket_cap_mb"] == 1
    assert doc["ddp"]["graph_count"] == len(doc["graphs"]) == 0
    assert doc["graph_breaks"] and doc["no_graph"]
    assert "traced as torch.compile(DDP(model))" in doc["ddp"]["notes"][0]


def test_lint_ddp_calls_get_distributed_model_with_the_world_size(cli):
    rc, out, err = cli("lint", DDP_FIXTURES / "factory.py", "--ddp", "--world-size", "3", "--bucket-cap-mb", "1",
                       "--format", "json")
    assert rc == 0, err
    assert json.loads(out)["models"][0]["graph_count"] == 3


def test_cudagraphs_ddp_judges_each_split_graph_apart(cli):
    """cpu_hop.py at 1 MB: one graph per layer; only the second holds the CPU round trip."""
    rc, out, err = cli("cudagraphs", DDP_FIXTURES / "cpu_hop.py", "--ddp", "--bucket-cap-mb", "1", "--format", "json")
    assert rc == 0, err
    doc = json.loads(out)
    graphs = doc["ddp"]["graphs"]
    assert [g["region"] for g in graphs] == [0, 1, 2, 3] and doc["cudagraphs"]["regions"] == 4
    assert [g["cudagraphs"]["cudagraphed"] for g in graphs] == [True, False, True, True]
    hop = graphs[1]["cudagraphs"]
    assert hop["partitions_cudagraphed"] < hop["partitions"]
    assert doc["cudagraphs"]["steady_state"]["steps"] == 3
    assert any("outside every CUDA graph" in n for n in doc["ddp"]["notes"])
    jsonschema = pytest.importorskip("jsonschema")
    from importlib import resources

    schema = json.loads(resources.files("graphtool.schema").joinpath("report.schema.json").read_text())
    jsonschema.validate(doc["ddp"], schema["properties"]["ddp"])


@ONE_TORCH
def test_cudagraphs_ddp_table_gives_each_split_its_verdict(cli):
    rc, out, err = cli("cudagraphs", DDP_FIXTURES / "cpu_hop.py", "--ddp", "--bucket-cap-mb", "1")
    assert rc == 0, err
    assert "region 1: bucket 1, 2 params, 1.0 MB, module layers.1" in out
    assert "CUDA graphs: partly: 2 of 4 partitions CUDA-graphed" in out
    assert out.count("CUDA graphs: applied (forward, backward)") == 3
    ddp_block = out[out.index("under DDP"):]
    assert max(len(line) for line in ddp_block.splitlines()) <= 80


@pytest.mark.slow  # over 6 s: the slow tier (docs/ci.md)
def test_cudagraphs_ddp_counts_recompiles_across_steps_with_the_users_line(cli):
    rc, out, err = cli("cudagraphs", DDP_FIXTURES / "recompile.py", "--ddp", "--bucket-cap-mb", "1", "--format", "json")
    assert rc == 0, err
    doc = json.loads(out)
    steady = doc["cudagraphs"]["steady_state"]
    assert [f["graphs_compiled"] for f in steady["per_step"]] == [4, 4, 4]  # 4 split graphs per recompile
    # the guard's line, where the forward reads self.calls (torch's own user stack), not the forward's def line
    assert [(r["step"], r["line"]) for r in steady["recompiles"]] == [(2, 14), (3, 14)]
    assert "self.calls == 0" in steady["recompiles"][0]["reason"] and "recompile.py:14" in steady["recompiles"][0]["reason"]
    assert doc["ddp"]["graph_count"] == 12 and doc["ddp"]["dynamo_graphs"] == 3


def test_trace_ddp_cudagraphs_validates_and_gives_each_split_its_verdict(cli):
    rc, out, err = cli("trace", DDP_FIXTURES / "break_mid.py", "--ddp", "--bucket-cap-mb", "1", "--cudagraphs", "inductor",
                       "--format", "json")
    assert rc == 0, err
    doc = json.loads(out)
    jsonschema = pytest.importorskip("jsonschema")
    from importlib import resources

    jsonschema.validate(doc, json.loads(resources.files("graphtool.schema").joinpath("report.schema.json").read_text()))
    assert len(doc["graphs"]) == doc["ddp"]["graph_count"] == doc["cudagraphs"]["regions"] == 6
    assert all(g["cudagraphs"]["cudagraphed"] for g in doc["ddp"]["graphs"])


def test_trace_ddp_runs_two_steps_and_exits_1_on_unused_parameters(cli):
    rc, out, err = cli("trace", DDP_FIXTURES / "unused.py", "--ddp")
    assert rc == 1, err
    assert "UNUSED PARAMETERS: unused.weight, unused.bias got no gradient (set at" in out
    assert "Expected to" in out and "find_unused_parameters=True" in out
    block = out[out.index("under DDP"):]
    assert max(len(line) for line in block.splitlines()) <= 80


def test_find_unused_parameters_lets_the_loop_go_on_and_validates(cli):
    rc, out, err = cli("trace", DDP_FIXTURES / "unused.py", "--ddp", "--find-unused-parameters", "--format", "json")
    assert rc == 0, err
    doc = json.loads(out)
    jsonschema = pytest.importorskip("jsonschema")
    from importlib import resources

    jsonschema.validate(doc, json.loads(resources.files("graphtool.schema").joinpath("report.schema.json").read_text()))
    unused = doc["ddp"]["unused_parameters"]
    assert unused["parameters"] == ["unused.weight", "unused.bias"] and unused["fails_at_step"] is None


@ONE_TORCH
def test_find_unused_parameters_without_ddp_exits_2(cli):
    rc, out, err = cli("trace", DDP_FIXTURES / "mlp8.py", "--find-unused-parameters")
    assert rc == 2 and "--find-unused-parameters is a DDP setting: add --ddp" in err


def test_a_model_using_every_parameter_has_no_unused_key(cli):
    assert "unused_parameters" not in _ddp(cli, "mlp8.py")


@pytest.mark.slow
def test_a_transformers_decoder_splits_per_layer_with_its_modules_named(cli):
    """llama.py (4 layers, ~2.5 MiB each) at 2 MB; transformers' decorated forward enters dynamo as L['args'][0]."""
    ddp = _ddp(cli, "llama.py", "--bucket-cap-mb", "2")
    assert ddp["graph_count"] == 5 and ddp["dynamo_graphs"] == 1
    assert [g["module"] for g in ddp["graphs"]] == ["model.embed_tokens"] + [
        f"model.layers.{i}.mlp.down_proj" for i in range(4)]
    assert "lm_head.weight" in ddp["graphs"][-1]["params"]
