"""The loop's shape schedule where it belongs (issue 34): ``cudagraphs --schedule`` and ``report --schedule`` carry
``graphtool shapes``' own prediction over the script's ``get_input_schedule()``, from the same load (the script runs
once: tests/commands/test_load_once.py), and refuse what they cannot do with exit 2."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CNN = ROOT / "tests" / "fixtures" / "shapes" / "cnn_last_batch.py"


@pytest.mark.slow  # two predictions of 8 steps, about 20 s: the slow tier (docs/ci.md)
def test_cudagraphs_schedule_is_the_shapes_prediction(cli):
    rc, out, err = cli("cudagraphs", CNN, "--schedule", "--format", "json")
    assert rc == 0, err
    got = json.loads(out)
    rc, out, err = cli("shapes", CNN, "--no-advice", "--format", "json")
    assert rc == 0, err
    want = json.loads(out)["shapes"]
    assert got["shapes"] == want
    assert [s["recordings"] for s in got["shapes"]["per_step"]] == [0, 2, 0, 0, 0, 2, 0, 2]  # the H200's row
    assert got["cudagraphs"]["eligible"] is True  # the verdict of the example inputs is still there


@pytest.mark.slow  # a report and a prediction, about 12 s
def test_report_schedule_has_the_changing_shapes_section(cli, tmp_path):
    page = tmp_path / "r.html"
    rc, _, err = cli("report", CNN, "--schedule", "-o", page)
    assert rc == 0, err
    html = page.read_text()
    assert '<section id="shapes">' in html and "get_input_schedule() at" in html
    assert "made by: graphtool report" in html and "--schedule" in html


@pytest.mark.parametrize("command", ["cudagraphs", "report"])
def test_schedule_under_ddp_is_refused(cli, command, tmp_path):
    rc, _, err = cli(command, CNN, "--schedule", "--ddp", *(["-o", tmp_path / "r.html"] if command == "report" else []))
    assert rc == 2 and "--schedule with --ddp/--fsdp2: not supported yet" in err, err
    assert not (tmp_path / "r.html").exists()


@pytest.mark.slow  # a memory run of the CNN, about 8 s
def test_memory_schedule_measures_the_largest_step_and_its_pool(cli):
    rc, out, err = cli("memory", CNN, "--schedule", "--format", "json")
    assert rc == 0, err
    notes = json.loads(out)["memory"]["notes"]
    assert any("measured at step 1 of 8 of get_input_schedule() at" in n and "(input:0=32)" in n for n in notes), notes
    # the backward's recording at batch 32: gradients and the output, 27,136 bytes in the H200's pool
    # (tests/truth/gpu/shapes-h200-torch2.11.jsonl, cnn_last_batch, call 2)
    assert any("region 0 backward 26.5 KiB" in n for n in notes), notes


def test_memory_schedule_without_one_says_so(cli):
    rc, _, err = cli("memory", ROOT / "examples" / "mlp.py", "--schedule")
    assert rc == 2 and "memory --schedule: the script has no get_input_schedule()" in err, err


@pytest.mark.slow  # four predictions of 15 steps of a tiny model, about 15 s
def test_capture_sizes_advice_is_its_own_prediction(cli):
    """The advice to CUDA-graph only the most frequent sizes says what predicting that change gives: the same
    numbers as ``shapes --mark-dynamic --set cudagraph_capture_sizes=...`` run on its own."""
    fixture = ROOT / "tests" / "fixtures" / "load_once" / "counted.py"
    sizes = "x:0=4,6,8,10,12,4,6,8,10,12,4,6,8,4,6"
    rc, out, err = cli("shapes", fixture, "--sizes", sizes, "--format", "json")
    assert rc == 0, err
    advice = {a["kind"]: a for a in json.loads(out)["shapes"]["advice"]}
    got = advice["capture_sizes"]["checked"]
    assert got["capture_sizes"] == [4, 6, 8, 10]  # the four most frequent lengths
    rc, out, err = cli("shapes", fixture, "--sizes", sizes, "--mark-dynamic", "x:0", "--set",
                       "cudagraph_capture_sizes=4,6,8,10", "--no-advice", "--format", "json")
    assert rc == 0, err
    alone = json.loads(out)["shapes"]
    assert {k: got[k] for k in ("recordings", "graphed_steps", "graphs_compiled")} == {
        k: alone[k] for k in ("recordings", "graphed_steps", "graphs_compiled")}
    assert alone["recordings"] < json.loads(cli("shapes", fixture, "--sizes", sizes, "--no-advice", "--format",
                                                "json")[1])["shapes"]["recordings"]


def test_the_apis_cudagraphs_takes_the_schedule_of_a_model_object():
    """``graphtool.cudagraphs(model, x, schedule=[...])``: a model object has no get_input_schedule(); the inputs per
    step given are predicted, as ``graphtool.shapes(model, x, schedule=[...])`` predicts them."""
    import torch

    import graphtool

    net = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU())
    steps = [(torch.randn(n, 8),) for n in (4, 6, 4, 6)]
    got = graphtool.cudagraphs(net, torch.randn(4, 8), schedule=steps)
    want = graphtool.shapes(net, torch.randn(4, 8), schedule=steps, advise=False)
    assert got.shapes is not None and got.shapes.to_dict() == want.report.to_dict()
