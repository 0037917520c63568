"""``lint --max-compile-seconds`` (and ``max_compile_seconds`` in graphtool.yaml): the model's cold compile, as
``graphtool compile`` measures it (``Session.compile()``), as a budget (issues 46-48's wiring). The budget's
arithmetic is a doctest (analysis.lint.with_compile_time, analysis.compile_time.judge_compile_budget); here: the
config and the flag, the lint wiring over a Session's compile (its child replaced by a hand-built report), the
views, and one real end-to-end run (slow)."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from graphtool.analysis.compile_time import CompileReport, CompileRun, Failure
from graphtool.analysis.lint import Budget, LintReport, LintTarget, ModelLint
from graphtool.commands.compile import CompileResult
from graphtool.config import load_config
from graphtool.errors import ConfigError, GraphtoolError
from tests.helpers import FIXTURES, example

VIEWS = FIXTURES / "compile" / "views_only.py"
MLP = example("mlp.py")


def _report(seconds: float | None, stopped: Failure | None = None) -> CompileReport:
    run = CompileRun("whole", first_call_seconds=None if seconds is None else seconds + 0.5, eager_step_seconds=0.5)
    return CompileReport("m.py", None, "0", "2.13", "cpu", "inductor", None, True, "off", run, stopped=stopped)


def _model(path: str, budget: float | None, status: str = "ok") -> ModelLint:
    return ModelLint(LintTarget(path, budget=Budget(max_compile_seconds=budget)), status, None, None, 1, (), (), (), (),
                     (), 1.0)


def test_the_budget_comes_from_the_top_of_the_config_and_a_model_overrides_it(tmp_path):
    (tmp_path / "m.py").write_text("")
    (tmp_path / "graphtool.yaml").write_text("max_compile_seconds: 120\nmin_coverage: 0.9\nmodels:\n  - path: m.py\n"
                                             "  - path: m.py\n    max_compile_seconds: 30.5\n    min_coverage: 1\n")
    a, b = load_config(tmp_path / "graphtool.yaml").models
    assert (a.max_compile_seconds, a.min_coverage, b.max_compile_seconds, b.min_coverage) == (120, 0.9, 30.5, 1)
    from graphtool.commands.lint import _merge

    assert _merge(b, Budget(max_compile_seconds=10)).max_compile_seconds == 10  # the flag wins
    assert _merge(b, Budget()).max_compile_seconds == 30.5 and _merge(None, Budget()).max_compile_seconds is None


@pytest.mark.parametrize(("yaml_text", "said"), [
    ("max_compile_seconds: 0\n", "graphtool.yaml:1: max_compile_seconds: must be a number of seconds greater than 0, got 0"),
    ("models:\n  - path: m.py\n    max_compile_seconds: .nan\n", "graphtool.yaml:3: models.0.max_compile_seconds: must be a "
     "number of seconds greater than 0, got nan"),
    ("max_compile_seconds: soon\n", "graphtool.yaml:1: max_compile_seconds: must be int or float, got str"),
    ("min_coverage: 1.5\n", "graphtool.yaml:1: min_coverage: must be a share from 0 to 1 (0.9 for 90%), got 1.5"),
])
def test_a_bad_budget_in_the_config_names_file_key_and_line(tmp_path, yaml_text, said):
    (tmp_path / "m.py").write_text("")
    (tmp_path / "graphtool.yaml").write_text(yaml_text)
    with pytest.raises(ConfigError) as e:
        load_config(tmp_path / "graphtool.yaml")
    assert said in str(e.value)


@pytest.mark.parametrize(("args", "said"), [
    ((MLP, "--max-compile-seconds", "0"), "--max-compile-seconds must be a number of seconds greater than 0, got 0"),
    (("--run", MLP, "--max-compile-seconds", "5"), "--max-compile-seconds compiles a model script"),
    (("--log", str(FIXTURES / "torch_trace"), "--max-compile-seconds", "5"), "--max-compile-seconds"),
])
def test_a_budget_that_cannot_be_judged_is_a_usage_error_before_anything_runs(cli, args, said):
    rc, _, err = cli("lint", *args)
    assert rc == 2 and said in err


def test_lint_asks_a_session_for_the_compile_and_judges_it(monkeypatch):
    """``_compile_times``: one ``Session(path).compile()`` per model with a budget (none for a model without, nor for
    one lint could not run), its report judged; a compile that could not be had is the model's error."""
    import graphtool.commands.compile as compile_command
    from graphtool.commands.lint import _compile_times
    from graphtool.commands.progress import SILENT

    asked = []

    def fake_run(session, **options):
        asked.append((Path(session.target).name, session.timeout, options["backend"]))
        if "broken" in session.target:
            raise GraphtoolError("the whole compile's child failed")
        return CompileResult(_report(70.1 if "slow" in session.target else 2.0))

    monkeypatch.setattr(compile_command, "run", fake_run)
    slow, fast, none, errored, broken = (str(Path(MLP).with_name(n)) for n in
                                         ("slow.py", "fast.py", "none.py", "errored.py", "broken.py"))
    monkeypatch.setattr("graphtool.capture.user.script.check_script_path", lambda path: None)
    out = _compile_times([_model(slow, 60), _model(fast, 60), _model(none, None), _model(errored, 60, "error"),
                          _model(broken, 60)], 300.0, False, SILENT)
    assert asked == [("slow.py", 300.0, "inductor"), ("fast.py", 300.0, "inductor"), ("broken.py", 300.0, "inductor")]
    assert (out[0].status, out[0].failures) == ("over_budget", ("compile took 70.1 s, budget 60 s: over by 10.1 s "
                                                                "(max_compile_seconds)",))
    assert out[0].to_dict()["compile_time"] == {"seconds": 70.1, "budget": 60, "ok": False,
                                                 "text": "compile took 70.1 s, budget 60 s: over by 10.1 s"}
    assert (out[1].status, out[1].compile_time["ok"], out[1].failures) == ("ok", True, ())
    assert out[2] is not None and out[2].compile_time is None and out[3].compile_time is None
    assert out[4].status == "error" and out[4].error == ("max_compile_seconds 60: the compile could not be measured: "
                                                         "the whole compile's child failed")
    # a compile that timed out never fits
    from graphtool.analysis.lint import with_compile_time

    stopped = with_compile_time(_model(fast, 60), _report(None, Failure("timeout", "--timeout 5 s ran out", "compiling")))
    assert stopped.status == "over_budget" and "compile did not finish (--timeout 5 s ran out)" in stopped.failures[0]


def test_the_compile_time_in_every_format():
    from graphtool.analysis.lint import with_compile_time
    from graphtool.commands.lint import LintOutcome
    from graphtool.render.lint import format_junit, format_sarif

    over = with_compile_time(_model("slow.py", 60), _report(70.1))
    under = with_compile_time(_model("fast.py", 60), _report(2.0))
    outcome = LintOutcome(LintReport((over, under), None))
    text = outcome.text(80)
    assert max(len(ln) for ln in text.splitlines() if ln[:1] in "┏┃┡│└") <= 80  # the table; a diagnostic is one line
    assert "compile s" in text and "70.1" in text and "compile took 70.1 s, budget 60 s: over by 10.1 s" in text
    sarif = json.loads(format_sarif(outcome.report))
    results = [r for r in sarif["runs"][0]["results"] if r["ruleId"] == "compile-time"]
    assert [r["level"] for r in results] == ["error", "note"]
    junit = ET.fromstring(format_junit(outcome.report))
    failure = junit.find(".//testcase/failure")
    assert "compile took 70.1 s" in failure.get("message") and "compile took 70.1 s" in failure.text
    assert [m["compile_time"]["ok"] for m in outcome.to_dict()["models"]] == [False, True]


def test_without_the_budget_there_is_no_column():
    from graphtool.commands.lint import LintOutcome

    assert "compile s" not in LintOutcome(LintReport((_model("m.py", None),), None)).text(80)


@pytest.mark.slow  # two lint children and two real compiles (inductor, a view: no C++), ~25 s here
def test_a_model_over_its_compile_budget_fails_and_one_under_passes(cli, tmp_path):
    """The same model under two entries, two budgets from the config: the real cold compile (a fresh process, caches
    off) judged against each, with the seconds ``graphtool compile`` measures."""
    (tmp_path / "graphtool.yaml").write_text(f"jobs: 2\nmodels:\n  - path: {VIEWS}\n    max_compile_seconds: 0.001\n"
                                             f"  - path: {VIEWS}\n    entry: again\n    max_compile_seconds: 600\n")
    rc, out, err = cli("lint", "--config", str(tmp_path / "graphtool.yaml"), "--format", "json")
    over, under = json.loads(out)["models"]
    assert rc == 1, err
    assert over["status"] == "over_budget" and over["budget"]["max_compile_seconds"] == 0.001
    assert over["compile_time"]["ok"] is False and over["compile_time"]["seconds"] > 0.001
    assert over["failures"] == [over["compile_time"]["text"] + " (max_compile_seconds)"]
    assert under["status"] == "ok" and under["compile_time"]["ok"] is True and 0 < under["compile_time"]["seconds"] < 600


def test_compile_is_a_session_question_and_an_api_door(monkeypatch):
    """``Session.compile()`` and ``graphtool.compile()`` read the option table as every command does; the compile runs
    in fresh children, so it takes a script (not a model object) on a real device."""
    import inspect

    import torch

    import graphtool
    import graphtool.commands.compile as compile_command
    from graphtool.errors import UsageError

    assert list(inspect.signature(graphtool.Session.compile).parameters)[1:] == ["backend", "mode", "regional", "warm", "steps"]
    seen = []
    monkeypatch.setattr(compile_command, "compile_model", lambda path, **kw: seen.append((path, kw)) or CompileResult(_report(1.0)))
    with graphtool.load(MLP, timeout=30) as s:
        first = s.compile(backend="eager", steps=1)
        assert s.compile(backend="eager", steps=1) is first  # kept: one measurement per question
    assert len(seen) == 1 and seen[0][0] == MLP and seen[0][1]["timeout"] == 30 and seen[0][1]["backend"] == "eager"
    assert graphtool.compile(MLP, regional=True).report.full.seconds == 1.0 and seen[-1][1]["regional"] is True
    with pytest.raises(UsageError, match="a model object cannot be handed"):
        graphtool.compile(torch.nn.Linear(2, 2), torch.ones(1, 2))
    with pytest.raises(UsageError, match="--device meta has no data to run"):
        graphtool.load(MLP, device="meta").compile()


def test_report_compile_takes_a_script():
    import torch

    import graphtool
    from graphtool.errors import UsageError

    with pytest.raises(UsageError, match="a model object cannot be handed"):
        graphtool.report(torch.nn.Linear(2, 2), torch.ones(1, 2), compile=True)


@pytest.mark.slow  # a report (trace, stand-in, pictures) and a real compile in a fresh process (inductor, a view)
def test_report_compile_has_the_compile_time_section_and_capture_coverage(cli, tmp_path):
    page = tmp_path / "r.html"
    rc, out, err = cli("report", VIEWS, "--no-memory", "--compile", "-o", page)
    assert rc == 0, err
    html = page.read_text()
    assert '<section id="compile"><h2>Compile time</h2>' in html and "inductor" in html
    assert "made by: graphtool report" in html and "--compile" in html
    assert "Capture coverage: 1 call captured, 0 fallbacks to eager" in html


def test_session_lint_takes_every_budget_the_gate_takes(monkeypatch):
    """In Python, ``graphtool.load(model).lint(...)`` judges the same budgets as ``graphtool lint``: capture coverage
    measured in this process (a graph break leaves calls outside the graphs), the compile asked of the same Session
    (its child replaced here), and a model object, which has no script to compile, refused."""
    import torch

    import graphtool
    import graphtool.commands.compile as compile_command
    from graphtool.errors import UsageError

    @torch.compiler.disable
    def eager(x):  # dynamo runs it as it is: its torch calls are outside every graph
        return torch.sin(x) * 3

    class Breaks(torch.nn.Module):
        def forward(self, x):
            return torch.tanh(eager(torch.relu(x) + 1)) * 2

    with graphtool.load(Breaks(), torch.randn(4)) as s:
        gated = s.lint(min_coverage=1.0)
        measured = s.lint(coverage=True)
        with pytest.raises(UsageError, match="a model object has none"):
            s.lint(max_compile_seconds=60)
        with pytest.raises(UsageError, match="--min-coverage must be a share"):
            s.lint(min_coverage=2)
    (m,) = gated.report.models
    assert m.coverage["in_graphs"] < m.coverage["torch_calls"] and not gated.passed and m.status == "over_budget"
    assert m.failures[0].startswith("op coverage 67% (4 of 6 torch calls") and m.target.budget.min_coverage == 1.0
    assert measured.report.models[0].coverage == m.coverage and measured.passed
    monkeypatch.setattr(compile_command, "run", lambda session, **options: CompileResult(_report(70.1)))
    with graphtool.load(MLP) as s:
        over = s.lint(max_compile_seconds=60)
    assert not over.passed and over.report.models[0].failures[-1] == ("compile took 70.1 s, budget 60 s: over by 10.1 s "
                                                                      "(max_compile_seconds)")
