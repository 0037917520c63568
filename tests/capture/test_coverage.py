"""Capture coverage is torch's own, on every tested torch: graphtool's ``calls_captured`` and ``fallbacks_to_eager``
(trace's, lint's and the coverage run's) equal dynamo's counters for one plain ``torch.compile`` call of the same
model, nested graph breaks off and on; and the torch calls counted inside compiled graphs equal
``calls_captured`` where each graph node is one torch call (these small models).

The counters here are read by the test itself (``torch._dynamo.utils.counters`` after a reset), not through
graphtool."""

from __future__ import annotations

import contextlib
import functools
import io

import pytest

from graphtool.capture import compat
from graphtool.capture.coverage import measure_coverage
from graphtool.capture.user.script import load_model
from tests.helpers import FIXTURES, example

torch = pytest.importorskip("torch")

SCRIPTS = {
    "mlp": example("mlp.py"),  # one graph, every call in it
    "graph_breaks": example("graph_breaks.py"),  # a break in a loop: the frame falls back to eager
    "torch_versions": str(FIXTURES / "diff" / "torch_versions.py"),  # 2.13 runs 3 of its 5 calls eagerly, 2.15 none
    "nested": str(FIXTURES / "diff" / "nested_break.py"),  # a break inside a helper: nested graph breaks change it
}


@functools.cache
def loaded(name: str):
    return load_model(SCRIPTS[name])


@functools.cache
def torch_counters(name: str, nested: bool) -> dict:
    """One call of ``torch.compile(model, backend="eager")`` after a reset, read from dynamo's own counters."""
    from torch._dynamo.utils import counters

    spec = loaded(name)
    torch._dynamo.reset()
    counters.clear()
    with torch._dynamo.config.patch(nested_graph_breaks=nested), contextlib.redirect_stdout(io.StringIO()):
        torch.compile(spec.model, backend="eager")(*spec.args, **spec.kwargs)
    out = {"calls_captured": counters["stats"]["calls_captured"], "graphs": counters["stats"]["unique_graphs"],
           "fallbacks_to_eager": counters["frames"]["total"] - counters["frames"]["ok"],
           "graph_breaks": sum(counters["graph_break"].values())}
    torch._dynamo.reset()
    return out


@functools.cache
def measured(name: str):
    spec = loaded(name)
    return measure_coverage(spec.model, spec.args, spec.kwargs)


@pytest.mark.parametrize("name", sorted(SCRIPTS))
def test_each_setting_is_torchs_own_counters(name):
    counts = measured(name)
    assert [s.nested_graph_breaks for s in counts.settings] == [False, True]  # 2.13 and 2.15 both have the setting
    for s in counts.settings:
        truth = torch_counters(name, s.nested_graph_breaks)
        assert (s.calls_captured, s.graphs, s.fallbacks_to_eager, s.graph_breaks) == (
            truth["calls_captured"], truth["graphs"], truth["fallbacks_to_eager"], truth["graph_breaks"]), s


@pytest.mark.parametrize("name", sorted(SCRIPTS))
def test_calls_inside_graphs_are_the_calls_dynamo_captured(name):
    counts = measured(name)
    assert counts.torch_calls == {"mlp": 3, "graph_breaks": 3, "torch_versions": 5, "nested": 5}[name]
    for s in counts.settings:
        assert s.in_graphs == s.calls_captured <= counts.torch_calls


def test_nested_graph_breaks_change_what_the_break_count_says():
    off, on = measured("nested").settings
    assert (off.graph_breaks, on.graph_breaks) == (torch_counters("nested", False)["graph_breaks"],
                                                   torch_counters("nested", True)["graph_breaks"])
    assert on.graphs < off.graphs and on.in_graphs == off.in_graphs  # fewer graphs, the same calls captured


@pytest.mark.slow  # a trace and two lint runs: the slow tier (docs/ci.md), still on both torches (-m versions)
def test_trace_and_lint_report_torchs_counters_for_their_own_call():
    from graphtool.capture.processes.lint_job import LintJob
    from graphtool.capture.processes.lint_worker import lint_one
    from graphtool.commands.trace import trace

    for name in ("graph_breaks", "torch_versions"):
        truth = torch_counters(name, False)
        doc = trace(SCRIPTS[name], backend="aot_eager")[0].to_dict()
        assert (doc["calls_captured"], doc["fallbacks_to_eager"]) == (truth["calls_captured"], truth["fallbacks_to_eager"])
        result = lint_one(LintJob(SCRIPTS[name], reset=True, coverage=True))
        assert result.counters["calls_captured"] == truth["calls_captured"]
        assert result.counters["fallbacks_to_eager"] == truth["fallbacks_to_eager"]
        assert result.coverage["settings"][0]["calls_captured"] == truth["calls_captured"]
        # lint's own findings: what the coverage run's compiles recorded is not lint's
        assert result.breaks == lint_one(LintJob(SCRIPTS[name], reset=True)).breaks


def test_the_compat_counters_subtract_two_readings():
    before = compat.capture_counters()
    spec = loaded("mlp")
    torch._dynamo.reset()
    torch.compile(spec.model, backend="eager")(*spec.args)
    got = compat.counters_since(before)
    torch._dynamo.reset()
    assert got["calls_captured"] == 3 and got["unique_graphs"] == 1 and got["fallbacks_to_eager"] == 0
    assert compat.has_dynamo_flag("nested_graph_breaks") and not compat.has_dynamo_flag("no_such_flag")
    assert set(compat.dynamo_counters()) >= {"stats", "frames", "graph_break"}
