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


def _checked(tmp_path, nodeid: str, breaks: int):
    """What ``graphtool.check`` hands the baseline for one test: a judged lint result with ``breaks`` breaks."""
    from types import SimpleNamespace

    from graphtool.analysis.lint import LintResult, LintTarget, judge
    from graphtool.capture.processes.lint_job import BreakRecord

    found = tuple(BreakRecord("print", None, str(tmp_path / "m.py"), 3 + i, "print(x)", None, 1) for i in range(breaks))
    model = judge(LintTarget(str(tmp_path / nodeid)), LintResult(ok=True, graph_count=1 + breaks, breaks=found))
    return SimpleNamespace(report=SimpleNamespace(models=(model,)))


def test_the_baseline_says_what_it_wrote_or_why_it_wrote_nothing(tmp_path):
    # the first run wrote the file, and a -k run wrote nothing, both without a word
    from graphtool.pytest_plugin import _Baseline

    path = tmp_path / "gb.json"
    state = _Baseline(path, False, tmp_path)
    state.expected = {"test_m.py::test_a", "test_m.py::test_b"}
    state.record("test_m.py::test_a", _checked(tmp_path, "test_m.py::test_a", 1))
    said = state.finish(interrupted=False)
    assert not path.exists() and said.endswith(
        "gb.json not written: 1 graphtool-marked test of 2 did not check (deselected with -k/-m, "
        "or failed before graphtool.check): test_m.py::test_b")
    state.record("test_m.py::test_b", _checked(tmp_path, "test_m.py::test_b", 0))
    said = state.finish(interrupted=False)
    assert path.exists() and said.endswith("gb.json written (there was none): recorded 1 graph break of 2 tests")


def test_xdist_workers_hand_their_checks_to_the_controller_which_writes_what_one_process_would(tmp_path):
    # under -n 2 each worker is a session of its own and wrote its half of the file at its end, last one winning
    from graphtool.pytest_plugin import _Baseline

    order = [f"test_m.py::test_{c}" for c in "abcd"]
    breaks = {"test_m.py::test_a": 1, "test_m.py::test_b": 0, "test_m.py::test_c": 2, "test_m.py::test_d": 1}

    def session(folder, runs):
        state = _Baseline(folder / "gb.json", False, folder)
        state.expected, state.order = set(order), list(order)
        for nodeid in runs:
            state.record(nodeid, _checked(folder, nodeid, breaks[nodeid]))
        return state

    alone = tmp_path / "n0"
    alone.mkdir()
    session(alone, reversed(order)).finish(interrupted=False)  # the order tests ran in does not matter

    xdist = tmp_path / "n2"
    xdist.mkdir()
    controller = _Baseline(xdist / "gb.json", False, xdist)
    shares = [session(xdist, ["test_m.py::test_d", "test_m.py::test_a"]), session(xdist, ["test_m.py::test_c", "test_m.py::test_b"])]
    for worker in shares:
        share = worker.handover(interrupted=False)
        assert json.loads(json.dumps(share)) == share  # plain values: what execnet can carry
        controller.receive(share, crashed=False)
    assert not (xdist / "gb.json").exists()  # the workers wrote nothing
    said = controller.finish(interrupted=False)
    assert said.endswith("gb.json written (there was none): recorded 4 graph breaks of 4 tests")
    assert (xdist / "gb.json").read_text() == (alone / "gb.json").read_text()
    assert [e["model"] for e in json.loads((alone / "gb.json").read_text())["breaks"]] == [
        "test_m.py::test_a", "test_m.py::test_c", "test_m.py::test_c", "test_m.py::test_d"]

    # a worker that crashed, or stopped early, hands over nothing the controller may write
    (xdist / "gb.json").unlink()
    controller = _Baseline(xdist / "gb.json", False, xdist)
    controller.receive(shares[0].handover(interrupted=False), crashed=False)
    controller.receive(None, crashed=True)
    assert controller.finish(interrupted=False).endswith("gb.json not written: the run stopped early")
    controller = _Baseline(xdist / "gb.json", False, xdist)
    controller.receive(shares[0].handover(interrupted=True), crashed=False)
    controller.receive(shares[1].handover(interrupted=False), crashed=False)
    assert controller.finish(interrupted=False).endswith("gb.json not written: the run stopped early")
    assert not (xdist / "gb.json").exists()


#: the inner sessions' lint, without torch: graph breaks as ``graphtool.check`` would find them in ``Model``'s
#: ``lines``. What the hand-over between xdist's processes does is graphtool's bookkeeping; real breaks of real
#: models through the same plugin are checked above (and a torch import per worker would cost seconds each)
FAKE_LINT = """
import graphtool.api
from graphtool.analysis.lint import Budget, LintReport, LintTarget
from graphtool.capture.processes.lint_job import BreakRecord, LintResult
from graphtool.commands import baseline as baselines
from graphtool.commands.lint import LintOutcome


class Model:
    def __init__(self, file, *lines):
        self.file, self.lines = file, lines


def lint(model, *args, max_graph_breaks=None, baseline=None, name=None, **_):
    found = tuple(BreakRecord("Failed to trace builtin operator", "gb0059", model.file, line, 'print("hi")', None)
                  for line in model.lines)
    target = LintTarget(path=name, budget=Budget(max_graph_breaks=max_graph_breaks))
    judged = baselines.judge(target, LintResult(ok=True, graph_count=1 + len(found), breaks=found), baselines.accepted(baseline))
    return LintOutcome(LintReport((judged,), None))


graphtool.api.lint = lint
"""


@pytest.mark.slow  # three pytest sessions of three processes each
@pytest.mark.one_torch  # the hand-over to xdist's controller is graphtool's; what the traces find is checked on every torch above
def test_xdist_runs_write_one_baseline_that_a_single_process_writes_too(pytester):
    # each xdist worker collected every marked test but ran half, so each found the other half missing and
    # none wrote: `pytest -n 2 --graphtool-baseline` never wrote a baseline
    pytest.importorskip("xdist")
    pytester.makeconftest(FAKE_LINT)
    for name, lines in (("a", "3, 7"), ("b", "4")):  # one file per worker (--dist loadfile)
        pytester.makepyfile(**{f"test_{name}": f"""
import pytest
from conftest import Model


@pytest.mark.graphtool
def test_chatty(graphtool):
    graphtool.check(Model(__file__, {lines}))


@pytest.mark.graphtool
def test_clean(graphtool):
    graphtool.check(Model(__file__))


def test_unmarked():
    pass
"""})
    base = pytester.path / "gb.json"
    result = _run(pytester, "-n", "2", "--dist", "loadfile", "--graphtool-baseline", str(base))
    result.assert_outcomes(passed=6)
    result.stdout.fnmatch_lines(["*graphtool baseline*", "gb.json written (there was none): recorded 3 graph breaks of 4 tests"])
    written = base.read_text()
    assert [(e["model"], e["line"]) for e in json.loads(written)["breaks"]] == [
        ("test_a.py::test_chatty", 3), ("test_a.py::test_chatty", 7), ("test_b.py::test_chatty", 4)]

    result = _run(pytester, "-n", "2", "--dist", "loadfile", "--graphtool-baseline", str(base))
    result.assert_outcomes(passed=6)  # the next parallel run passes against it and leaves it as it was
    assert "gb.json unchanged: 3 graph breaks of 4 tests as recorded" in result.stdout.str() and base.read_text() == written

    base.unlink()
    _run(pytester, "-n", "0", "--graphtool-baseline", str(base)).assert_outcomes(passed=6)
    assert base.read_text() == written  # one process writes the same bytes
