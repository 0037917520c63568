"""``graphtool log --against``: the run beside graphtool's prediction, each disagreement with its likely cause."""

from __future__ import annotations

import json

import pytest

from graphtool.analysis.run_log.against import Prediction, compare
from graphtool.analysis.run_log.build import read_run_log
from tests.log.recorded import DDP_213, HERE, LOOP_213

MODEL = HERE / "loop_model.py"
_LOOP = read_run_log([LOOP_213 / "trace"])


def _rows(comparison) -> dict:
    return {(r.fact, r.what): r for r in comparison.rows}


def test_agreement_and_causes_on_hand_built_predictions():
    site = ("/elsewhere/tests/fixtures/torch_trace/record.py", 54, "gb0059", "Failed to trace builtin operator")
    rows = _rows(compare(_LOOP, Prediction("loop_model.py", "2.13.0+cpu", 2, (site,))))
    assert rows[("graph break", "tests/fixtures/torch_trace/record.py:54")].agree  # another machine's root, same file
    g = rows[("graphs", "first call")]
    assert (g.predicted, g.seen, g.agree) == ("2", "3", False)
    assert "shift" in g.cause  # the frame only the run compiled
    r = rows[("recompiles", "")]
    assert (r.seen, r.agree) == ("4, 1 past recompile_limit", False) and r.cause.startswith("shapes the run saw")


def test_a_break_only_some_ranks_took_is_a_rank_dependent_branch():
    facts = read_run_log([DDP_213 / "trace"])
    rows = _rows(compare(facts, Prediction("m.py", "2.15.0", 1, ())))
    b = rows[("graph break", "tests/fixtures/torch_trace/record.py:47")]
    assert not b.agree and b.cause.startswith("only rank 1 took this path")
    assert rows[("graphs", "first call")].seen == "1 or 2 (ranks differ)"


def test_a_break_graphtool_predicts_that_the_run_never_reached():
    rows = _rows(compare(_LOOP, Prediction("m.py", "2.15.0+cpu", 2, (("/m.py", 9, None, "x"),))))
    r = rows[("graph break", "/m.py:9")]
    assert (r.predicted, r.seen, r.agree) == ("yes", "no", False)
    assert "torch version difference (the run: 2.13.0, graphtool: 2.15.0)" in r.cause


def test_cudagraph_skips_a_cpu_log_cannot_hold():
    r = _rows(compare(_LOOP, Prediction("m.py", "2.13.0", 2, (), cudagraph_skips=("mutated inputs",))))[
        ("cudagraph skips", "backend inductor")]
    assert not r.agree and r.cause.startswith("what a log cannot hold")


@pytest.mark.slow  # graphtool imports torch and traces the script (about 5 s of CPU, more on a busy machine)
def test_against_a_real_prediction(cli, monkeypatch):
    """One real prediction (graphtool traces loop_model.py: no inductor code generation) beside the recorded run:
    one Session, the script run once, asked what ``graphtool trace`` and ``graphtool cudagraphs`` print."""
    from graphtool.commands.session import Session

    asked, close = [], Session.close

    def closing(self):
        asked.append((self.loads.runs, {k[0] for k in self._kept if isinstance(k[0], str)}))
        close(self)

    monkeypatch.setattr(Session, "close", closing)
    rc, out, err = cli("log", LOOP_213 / "trace", "--against", MODEL, "--format", "json")
    assert rc == 0, err
    ((runs, kept),) = asked
    assert runs == 1 and {"trace", "cudagraphs"} <= kept
    doc = json.loads(out)["against"]
    rows = {(r["fact"], r["what"]): r for r in doc["rows"]}
    assert doc["prediction"]["graphs"] == 2 and doc["prediction"]["recompiles"] == 0
    assert rows[("graph break", "tests/fixtures/torch_trace/record.py:54")]["agree"]
    assert not rows[("recompiles", "")]["agree"]
    assert doc["disagreements"] == 2


@pytest.mark.slow  # a whole report: graphtool traces the script, its stand-in, and lays out its pictures
def test_report_with_the_run_beside_it(cli, tmp_path):
    page = tmp_path / "r.html"
    rc, out, err = cli("report", MODEL, "--log", LOOP_213 / "trace", "--no-memory", "-o", page)
    assert rc == 0, err
    html = page.read_text()
    assert "Beside a real run (graphtool log)" in html
    assert "6 graphs compiled in 7 compiles" in html
    assert "shapes the run saw" in html  # the recompiles row's likely cause
