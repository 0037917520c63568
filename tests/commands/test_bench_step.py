"""``graphtool bench`` on a whole training step (issue 30): the step runs its own backward and optimizer, so bench
runs none of its own, checks each mode against eager from the same parameters and optimizer state, and says so.
"""

from __future__ import annotations

import json
from importlib import resources

import pytest

from tests.helpers import example

FLAGS = ("--iters", "3", "--repeat", "1", "--warmup", "1", "--format", "json")


@pytest.mark.slow
def test_a_training_step_is_timed_as_it_is_and_checked_from_one_state(cli):
    import jsonschema

    rc, out, err = cli("bench", example("train_step.py"), *FLAGS)
    assert rc == 0, err
    doc = json.loads(out)
    assert doc["settings"]["own_step"]["kind"] == "train_step" and doc["settings"]["backward"] is False
    # compiled is checked against eager's loss: each call updates AdamW's state and the weights, so a check that
    # did not start both from the same state would read a mismatch
    modes = {m["name"]: m for m in doc["modes"]}
    assert modes["eager"]["status"] == modes["compile[default]"]["status"] == "ok"
    assert modes["compile[default]"]["max_abs_diff"] < 1e-5
    assert "a training step" in modes["eager"]["reason"]
    schema = json.loads(resources.files("graphtool.schema").joinpath("bench.schema.json").read_text())
    jsonschema.validate(doc, schema)


@pytest.mark.slow
def test_a_module_is_no_training_step(cli):
    rc, out, _ = cli("bench", example("mlp.py"), *FLAGS)
    assert rc == 0 and json.loads(out)["settings"]["own_step"] is None


def test_backward_on_a_step_that_runs_its_own_is_a_usage_error(cli):
    rc, out, err = cli("bench", example("train_step.py"), "--backward", *FLAGS)
    assert rc == 2
    assert "--backward: the model's call is a training step that runs its own backward" in err


@pytest.mark.slow
def test_the_api_times_a_step_and_leaves_its_weights_and_optimizer_as_they_were():
    torch = pytest.importorskip("torch")
    import graphtool

    torch.manual_seed(0)
    net = torch.nn.Linear(4, 2)
    opt = torch.optim.SGD(net.parameters(), lr=0.1, momentum=0.9)

    def step(x, y):
        loss = torch.nn.functional.mse_loss(net(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss

    before = net.weight.detach().clone()
    r = graphtool.bench(step, torch.randn(3, 4), torch.randn(3, 2), iters=3, repeat=1, warmup=1)
    assert r.report.own_step["kind"] == "train_step"
    assert [m.status for m in r.report.modes] == ["ok", "ok"]
    assert torch.equal(net.weight, before) and not opt.state  # the caller's step, as it was handed over


@pytest.mark.slow
def test_a_caller_who_trained_already_gets_its_optimizer_state_back_after_two_loads():
    """trace --bench loads the step twice (the trace, the bench); each load puts the optimizer back. Loading the saved
    state itself let the bench's steps write into it, so the caller got the bench's state back (AdamW's ``step``,
    ``exp_avg`` and ``exp_avg_sq`` all changed)."""
    torch = pytest.importorskip("torch")
    import graphtool

    torch.manual_seed(0)
    net = torch.nn.Linear(4, 2)
    opt = torch.optim.AdamW(net.parameters(), lr=0.1)

    def step(x, y):
        loss = torch.nn.functional.mse_loss(net(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss

    x, y = torch.randn(3, 4), torch.randn(3, 2)
    step(x, y)  # one step of the caller's own training
    before = {k: v.clone() for k, v in opt.state[net.weight].items()}
    weight = net.weight.detach().clone()
    graphtool.trace(step, x, y, bench=True)
    after = opt.state[net.weight]
    assert {k: torch.equal(v, after[k]) for k, v in before.items()} == {k: True for k in before}
    assert torch.equal(net.weight, weight)
