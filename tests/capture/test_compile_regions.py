"""The repeated-block probe in this process, dynamo only (a recording backend, no code generation): candidates,
first calls, aliasing, and what dynamo makes of each instance alone. The same code runs in graphtool compile's
child; tests/truth/test_compile_truth.py checks its answer against graphs compiled one by one."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from torch import nn

from graphtool.analysis.repeated_blocks import judge_blocks
from graphtool.capture.compile_regions import FirstCalls, candidate_groups, graph_hash, module_facts, probe_group
from graphtool.capture.user.script import load_model

FIXTURES = Path(__file__).parent.parent / "fixtures" / "compile"


class Passthrough(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)

    def forward(self, x):
        self.lin(x)
        return x  # the output is the input


class Expert(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)

    def forward(self, x):
        return self.lin(x)


class Layer(nn.Module):
    def __init__(self):
        super().__init__()
        self.experts = nn.ModuleList([Expert(), Expert()])

    def forward(self, x):
        return sum(e(x) for e in self.experts)


def test_candidates_are_the_outermost_repeats_with_nested_ones_named():
    model = nn.Sequential(Layer(), Layer(), nn.Linear(4, 4))
    groups = candidate_groups(model)
    assert [(g.cls, g.fqns, g.nested_in) for g in groups] == [
        ("Layer", ("0", "1"), None), ("Expert", ("0.experts.0", "0.experts.1", "1.experts.0", "1.experts.1"), "Layer")]


def test_first_calls_keep_inputs_and_see_an_output_that_is_an_input():
    model = nn.Sequential(Passthrough(), Passthrough())
    x = torch.randn(2, 4, requires_grad=True)
    with FirstCalls({"0": model[0], "1": model[1]}) as calls:
        model(x)
        model(x + 1)
    (args, kwargs) = calls.calls["1"]
    assert args[0].requires_grad and not args[0].grad_fn and kwargs == {}
    assert calls.aliased == {"0": ["output 0 is input 0"], "1": ["output 0 is input 0"]}
    assert not model[0]._forward_hooks and not model[0]._forward_pre_hooks  # removed on the way out


@pytest.fixture(scope="module")
def near_miss():
    spec = load_model(str(FIXTURES / "near_miss.py"))
    model = spec.model
    groups = candidate_groups(model)
    modules = {f: model.get_submodule(f) for f in groups[0].fqns}
    with FirstCalls(modules) as calls:
        model(*spec.args)
    return groups[0], modules, calls, probe_group(torch, modules, calls.calls)


def test_the_probe_reuses_identical_instances_and_recompiles_the_near_misses(near_miss):
    group, modules, calls, probe = near_miss
    assert group.fqns == tuple(f"blocks.{i}" for i in range(6))
    compiled = [p["fqn"] for p in probe if p["compiles"]]
    assert compiled == ["blocks.0", "blocks.4", "blocks.5"]  # the four alike compile once
    assert len({tuple(p["graphs"]) for p in probe[:4]}) == 1 and probe[4]["graphs"] != probe[0]["graphs"]
    assert "self.gate == False" in probe[4]["compiles"][0]["recompile_reason"]


def test_the_judgement_of_the_probe(near_miss):
    group, modules, calls, probe = near_miss
    raw = {"class": group.cls, "fqns": list(group.fqns), "probe": probe, "facts": {f: module_facts(m) for f, m in modules.items()}}
    (block,) = judge_blocks([raw], [])
    assert block.fqns == ("blocks.0", "blocks.1", "blocks.2", "blocks.3") and block.identical
    flag, config = block.near_misses
    assert flag.why == "a flag read in forward: self.gate is True here, False in blocks.0"
    assert config.why == "a different config: down.in_features=64 here, 32 in blocks.0; up.out_features=64 here, 32 in blocks.0"


def test_module_facts_and_the_structural_hash():
    facts = module_facts(Layer())
    assert facts["params"]["experts.0.lin.weight"] == "float32[4, 4]" and facts["reads"] == ["experts"]
    assert facts["attrs"]["experts.0.lin.in_features"] == "4"
    wide = torch.fx.symbolic_trace(nn.Linear(2, 3))
    assert graph_hash(wide) == graph_hash(torch.fx.symbolic_trace(nn.Linear(2, 3)))
