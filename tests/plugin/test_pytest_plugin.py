"""The pytest plugin, run in pytester's own pytest sessions: the fixture, the marker, the baseline ratchet."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("torch")

MODELS = '''
import pytest
import torch


class Clean(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(2, 2)

    def forward(self, x):
        return self.fc(x).relu()


class Chatty(Clean):
    def forward(self, x):
        print("hi")
        return self.fc(x)
'''


def _run(pytester, *args):
    # in-process is fast, but torch and dynamo state would leak between the inner sessions: a subprocess each
    return pytester.runpytest_subprocess("-p", "no:cacheprovider", "-q", *args)


def test_the_plugin_is_inert_for_tests_that_do_not_use_it(pytester):
    pytester.makepyfile(test_plain="def test_x():\n    assert 1 + 1 == 2\n")
    result = _run(pytester, "-p", "no:randomly")
    result.assert_outcomes(passed=1)
    code = "import sys, graphtool.pytest_plugin; print('torch' in sys.modules)"
    assert pytester.run(__import__("sys").executable, "-c", code).outlines[-1] == "False"


@pytest.mark.slow
def test_the_marker_checks_the_model_handed_to_the_fixture(pytester):
    pytester.makepyfile(models=MODELS, test_models='''
import pytest
import torch
from models import Chatty, Clean


@pytest.mark.graphtool(max_graph_breaks=0, cudagraphs=True)
def test_clean(graphtool):
    graphtool.check(Clean(), torch.randn(3, 2))


@pytest.mark.graphtool(max_graph_breaks=0)
def test_chatty(graphtool):
    graphtool.check(Chatty(), torch.randn(3, 2))


@pytest.mark.graphtool(max_graph_breaks=1)
def test_chatty_within_budget(graphtool):
    graphtool.check(Chatty(), torch.randn(3, 2))


@pytest.mark.graphtool
def test_forgot_to_check(graphtool):
    pass


def test_fixture_without_marker_and_helpers(graphtool):
    graphtool.check(Clean(), torch.randn(3, 2))
    graphtool.assert_no_input_mutations(Clean(), torch.randn(3, 2))
''')
    result = _run(pytester)
    result.assert_outcomes(passed=3, failed=2)
    out = result.stdout.str()
    assert "models.py:16:9: GT-B001 graph break: Failed to trace builtin operator [gb0059]" in out
    assert 'print("hi")' in out and "= see: https://meta-pytorch.github.io/compile-graph-break-site/gb/gb0059.html" in out
    assert "test_forgot_to_check is marked @pytest.mark.graphtool but never called graphtool.check(model, *args)" in out


def _baseline_test(pytester, chatty_body: str) -> None:
    pytester.makepyfile(models=MODELS.replace('        print("hi")\n        return self.fc(x)', chatty_body), test_models='''
import pytest
import torch
from models import Chatty, Clean


@pytest.mark.graphtool
def test_chatty(graphtool):
    graphtool.check(Chatty(), torch.randn(3, 2))


@pytest.mark.graphtool
def test_clean(graphtool):
    graphtool.check(Clean(), torch.randn(3, 2))
''')


@pytest.mark.slow
@pytest.mark.one_torch  # the ratchet is graphtool's; the print break it counts (gb0059) is checked on every torch above
def test_the_baseline_records_ratchets_and_survives_partial_runs(pytester):
    base = pytester.path / "graph-breaks.json"
    _baseline_test(pytester, '        print("hi")\n        return self.fc(x)')
    result = _run(pytester, "--graphtool-baseline", str(base))
    result.assert_outcomes(passed=2)  # recorded
    result.stdout.fnmatch_lines(["*graphtool baseline*", "graph-breaks.json written (there was none): recorded 1 graph break of 2 tests"])
    data = json.loads(base.read_text())
    assert data["version"] == 2 and [e["model"] for e in data["breaks"]] == ["test_models.py::test_chatty"]
    assert data["breaks"][0]["kind"] == "gb0059" and data["breaks"][0]["source_text"] == 'print("hi")'
    written = base.read_text()

    result = _run(pytester, "--graphtool-baseline", str(base))
    result.assert_outcomes(passed=2)  # known break: passes, file unchanged
    assert base.read_text() == written and "unchanged: 1 graph break of 2 tests as recorded" in result.stdout.str()

    # a new break fails its test and is not learnt
    _baseline_test(pytester, '        print("hi")\n        x = self.fc(x)\n        print("again")\n        return x')
    result = _run(pytester, "--graphtool-baseline", str(base))
    result.assert_outcomes(passed=1, failed=1)
    assert "(new)" in result.stdout.str() and base.read_text() == written
    assert "not written: new graph breaks in test_models.py::test_chatty; --graphtool-update-baseline records them" in result.stdout.str()

    # a partial run (-k) writes nothing, even with --graphtool-update-baseline
    _baseline_test(pytester, '        return self.fc(x)')
    result = _run(pytester, "--graphtool-baseline", str(base), "--graphtool-update-baseline", "-k", "clean")
    result.assert_outcomes(passed=1)
    assert base.read_text() == written
    assert "not written: 1 graphtool-marked test of 2 did not check (deselected with -k/-m" in result.stdout.str()

    # the break is fixed: the full run passes and the baseline tightens
    _run(pytester, "--graphtool-baseline", str(base)).assert_outcomes(passed=2)
    assert json.loads(base.read_text()) == {"version": 2, "breaks": []}


def test_the_baseline_says_what_it_wrote_or_why_it_wrote_nothing(tmp_path):
    # the first run wrote the file, and a -k run wrote nothing, both without a word
    from graphtool.analysis.lint import LintResult, LintTarget, judge
    from graphtool.capture.processes.lint_job import BreakRecord
    from graphtool.pytest_plugin import _Baseline

    path = tmp_path / "gb.json"
    state = _Baseline(path, False, tmp_path)
    state.expected = {"test_m.py::test_a", "test_m.py::test_b"}
    chatty = LintResult(ok=True, graph_count=2, breaks=(BreakRecord("print", None, str(tmp_path / "m.py"), 3, "print(x)", None, 1),))
    state.models["test_m.py::test_a"] = judge(LintTarget(str(tmp_path / "test_m.py::test_a")), chatty)
    said = state.finish(interrupted=False)
    assert not path.exists() and said.endswith(
        "gb.json not written: 1 graphtool-marked test of 2 did not check (deselected with -k/-m, "
        "or failed before graphtool.check): test_m.py::test_b")
    state.models["test_m.py::test_b"] = judge(LintTarget(str(tmp_path / "test_m.py::test_b")), LintResult(ok=True, graph_count=1))
    said = state.finish(interrupted=False)
    assert path.exists() and said.endswith("gb.json written (there was none): recorded 1 graph break of 2 tests")
