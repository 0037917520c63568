"""Nothing compiled is a finding in every command (issue 11, problem 6), and a verdict never calls
a model eligible when some region went unjudged (problem 5)."""

from __future__ import annotations

import pytest
import torch

from graphtool.analysis.cudagraphs.verdict import Verdict
from tests.helpers import FIXTURES, example

REPLACED = str(FIXTURES / "field" / "compile_replaced.py")


@pytest.fixture
def restore_compile():
    original = torch.compile
    yield
    torch.compile = original


@pytest.mark.parametrize("command", ["mutations", "devices", "cudagraphs"])
def test_a_replaced_torch_compile_is_found(command, restore_compile):
    import importlib

    run = getattr(importlib.import_module(f"graphtool.commands.{command}"), command)
    (result,) = run(REPLACED)
    assert result.found  # so --check exits 1
    assert "torch.compile was replaced" in result.header["no_graph"] and "compile_replaced.py:5" in result.header["no_graph"]


def test_trace_says_nothing_compiled(restore_compile):
    from graphtool.commands.trace import trace

    (result,) = trace(REPLACED)
    data = result.to_dict()
    assert data["graphs"] == [] and data["no_graph"].startswith("torch.compile was replaced")


def test_a_disabled_dynamo_is_found(monkeypatch):
    from graphtool.commands.cudagraphs import cudagraphs

    monkeypatch.setenv("TORCHDYNAMO_DISABLE", "1")
    (result,) = cudagraphs(example("mlp.py"))
    assert not result.report.eligible and result.found
    assert result.report.summary().startswith("torch.compile captured no graph, so nothing would be CUDA-graphed")


def test_a_verdict_with_unjudged_regions_is_never_eligible():
    partial = Verdict("inductor", False, True, 1, (), {}, regions_compiled=3, unjudged="stopped at m.py:9")
    assert "only 1 of 3 regions could be judged (stopped at m.py:9)" in partial.summary()
    d = partial.to_dict()
    assert (d["regions_judged"], d["regions_compiled"], d["eligible"]) == (1, 3, False)
