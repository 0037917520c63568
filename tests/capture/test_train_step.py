"""A model whose call is a whole training step (its own ``backward()`` and optimizer): graphtool notices,
runs no backward on top, names the optimizer's state, and puts a caller's step back as it was handed over.
What torch itself does with these steps is checked in ``tests/truth/test_train_step_truth.py`` (slow)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from graphtool.capture import train_step

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "train_step"


def test_a_freed_graph_and_the_declaration_say_the_step_ran_backward():
    """No compile: the eager facts the decision rests on."""
    net = torch.nn.Linear(3, 1)
    loss = net(torch.randn(2, 3)).pow(2).sum()
    assert not train_step.graph_freed(loss)
    loss.backward()
    assert train_step.graph_freed(loss)  # what graphtool's own backward would have tripped on
    assert not train_step.graph_freed(torch.ones(2))

    def step(x):
        return x

    class Spec:
        model, module_name = step, None

    assert train_step.declared(Spec) is None
    step.runs_backward = True
    assert train_step.declared(Spec) is True
    opt = torch.optim.SGD(net.parameters(), lr=0.1)
    Spec.model = opt.step
    assert train_step.optimizer_of_step(opt.step) is opt and train_step.optimizer_of_step(step) is None


def test_a_tiny_train_step_gets_no_backward_on_top():
    """The default tier's one compile of a step: SGD on one Linear, traced with aot_eager."""
    from graphtool.capture.model_object import object_spec
    from graphtool.capture.tracer import trace_model

    net = torch.nn.Linear(2, 1)
    opt = torch.optim.SGD(net.parameters(), lr=0.1)

    def step(x):
        loss = net(x).sum()
        loss.backward()
        opt.step()
        opt.zero_grad()
        return loss

    cap = trace_model(object_spec(step, (torch.ones(1, 2),)), backend="aot_eager")
    assert cap.own_step == train_step.OwnStep("train_step", "a compiled backward graph ran inside the call")
    assert cap.regions[0].backward is not None


@pytest.mark.slow  # over 20 s (the whole trace command, through the API): the slow tier (docs/ci.md)
def test_the_issues_train_step_traces_without_a_second_backward():
    """The issue's step (AdamW, foreach): 'Trying to backward through the graph a second time' before."""
    import graphtool
    from graphtool.capture.user.script import load_model

    spec = load_model(FIXTURES / "adamw.py")
    module = __import__("sys").modules[spec.module_name]
    weight = module.net[0].weight.detach().clone()
    r = graphtool.trace(spec.model, *spec.args, backend="aot_eager")
    assert r.to_dict()["own_step"] == {"kind": "train_step", "evidence": "a compiled backward graph ran inside the call"}
    assert [g["backward"] is not None for g in r.to_dict()["graphs"]] == [True, False]  # the loss's; the optimizer's
    assert {b.code for b in r.graph_breaks} == {"gb0123", "gb0025", "gb0008"}
    mutated = {m.name: m.kind for m in r.mutated_inputs}
    assert mutated["net.0.weight"] == "parameter"
    assert {n.rsplit(".", 1)[1] for n, k in mutated.items() if k == "optimizer_state"} == {"exp_avg", "exp_avg_sq", "step"}
    assert r.mutations.verdict() == "the optimizer step updates 4 parameters and 12 state tensors in place, as expected"
    # the caller's step as handed over: weights and the optimizer's (empty) state
    assert torch.equal(module.net[0].weight, weight) and len(module.opt.state) == 0
