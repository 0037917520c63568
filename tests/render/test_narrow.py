"""Issue 14's problems, each as a test that failed before: output at 80 columns and in a pipe keeps
every identifier and every ``file:line`` whole, reads in good English, and says what it left out.

Reports are the hand-made ones of test_views (torch is never imported). "A pipe" is what the CLI
prints when stdout is not a terminal: soft wrap (:func:`graphtool.cli.console.print_view`), no colour.
"""

from __future__ import annotations

import io
import re

import pytest
from rich.console import Console

from graphtool.analysis import diagnostics as dg
from graphtool.analysis.devices import DeviceReport
from graphtool.analysis.lint import Budget, LintReport, LintTarget, judge
from graphtool.capture.processes.lint_job import BreakRecord, LintResult
from graphtool.render.diagnostics import diagnostics_view, format_diagnostics
from graphtool.render.lint import lint_view
from graphtool.render.theme import THEME
from graphtool.render.trace import trace_view
from tests.helpers.console import render_text
from tests.render import test_views as v


def piped(renderable, width: int = 80) -> str:
    """What ``graphtool ... | cat`` prints: rich's width is 80 in a pipe, lines are soft-wrapped, no colour."""
    console = Console(width=width, file=io.StringIO(), record=True, force_terminal=False, color_system=None, theme=THEME, _environ={})
    console.print(renderable, soft_wrap=True)
    return console.export_text()


WIDE_FQNS = [p.name for p in v.FORWARD_0.placeholders if p.kind in ("parameter", "buffer")]


@pytest.mark.parametrize("width", [80, 120])
def test_trace_never_cuts_a_parameter_name(width):
    text = render_text(trace_view(v.TRACE), width)
    for name in WIDE_FQNS:  # q_proj, k_proj, v_proj were all "model.layers.0.sel…"
        assert name in text
    assert "…" not in text


def test_trace_header_never_wraps_inside_a_field():
    for width in range(40, 121):
        lines = render_text(trace_view(v.TRACE), width).splitlines()
        assert any("torch 2.13.0+cpu" in ln for ln in lines), width  # not "torch" | "2.13.0+cpu"
        assert any("entry get_model_and_inputs" in ln for ln in lines), width


def test_trace_says_which_ops_it_did_not_list():
    text = render_text(trace_view(v.TRACE), 120)
    assert "forward: 3 more op kinds not shown" in text  # 11 op kinds, 8 listed


def test_trace_shows_breaks_as_diagnostics_and_ends_with_one_summary_line():
    text = render_text(trace_view(v.TRACE), 80)
    assert "examples/llama_kv_cache.py:88: GT-B001 graph break:" in text
    assert text.rstrip().splitlines()[-1] == "2 compiled regions, 2 graph breaks, 0 skipped frames, 4 inputs mutated"


def test_trace_summary_counts_skipped_frames_and_the_cuda_graph_verdict():
    from dataclasses import replace

    from graphtool.analysis.trace_report import SkippedInfo

    report = replace(v.TRACE, skipped_frames=(SkippedInfo("forward", "/m.py", 3, "Attempted to wrap RNN", "/m.py", 4),))
    text = render_text(trace_view(report, "CUDA graphs would be applied"), 200)
    assert "/m.py:4: GT-B002 frame forward runs eagerly (skipped by dynamo): Attempted to wrap RNN" in text
    assert text.rstrip().endswith("1 skipped frame, 4 inputs mutated; CUDA graphs: CUDA graphs would be applied")


def test_mutations_where_keeps_its_line_number_at_80_columns():
    text = render_text(v.mutations_view(v.MUTATIONS), 80)
    for line in (41, 42, 63):  # was "examples/llama_…" in a cut column
        assert f"examples/llama_kv_cache.py:{line}: GT-M001" in text


def test_mutation_verdict_grammar():
    verdict = v.MUTATIONS.verdict()
    assert "is shares" not in verdict
    assert "output 3 shares storage with output 0" in verdict
    assert "output 2 is a view of an intermediate" in verdict


def test_lint_never_splits_a_model_path():
    text = render_text(lint_view(v.LINT_ERRORED), 80)
    for name in ("examples/graph_breaks.py", "examples/hf_llama.py:get_model_and_inputs", "examples/moe_router.py:build"):
        assert name in text  # was "examples/gr" | "aph_breaks." | "py"


@pytest.mark.parametrize("view", ["trace", "mutations", "devices", "lint_errored", "lint_failed"])
def test_in_a_pipe_every_location_is_one_whole_line(view):
    text = piped(v.VIEWS[view]())
    locations = re.findall(r"^(\S+?):(\d+)(?::\d+)?: (GT-[A-Z]\d{3}) ", text, flags=re.M)
    assert locations  # every diagnostic starts a line with path:line[:col]: CODE
    for line in text.splitlines():
        if re.search(r"GT-[A-Z]\d{3}", line):
            assert re.match(r"^\S+: GT-|^<unknown location>: GT-|^\S+:\d+(:\d+)?: GT-", line), line


def test_a_long_library_path_is_whole_in_a_pipe():
    text = piped(lint_view(v.LINT_PASSED))
    assert f"{v.TRANSFORMERS_LLAMA}:380:1: GT-B001 graph break (allowed)" in text


def test_devices_say_the_predicted_device_not_meta():
    text = render_text(v.devices_view(v.DEVICES), 80)
    assert text.startswith("5 nodes off cuda:0 (predicted), 4 cross-device copies")
    assert "meta" not in text
    assert "node(s)" not in text


def test_plurals():
    one = DeviceReport("cuda", None, (v.GraphDevices(0, "forward", {"cuda": 2, "cpu": 1},
                                                     (v.DeviceNode("a", "aten.mul.Tensor", "cpu", None),), ()),))
    assert one.verdict() == "1 node off cuda, 0 cross-device copies"
    b = BreakRecord("print", None, "m.py", 3, "print(x)", None, 1)
    out = judge(LintTarget("m.py"), LintResult(ok=True, graph_count=2, breaks=(b,)), Budget(max_graph_breaks=0))
    assert out.failures == ("1 graph break, budget 0",)


def test_diagnostic_format_like_ruff():
    lines = {("m.py", 3): "    y = x.item() + 1"}
    d = dg.graph_break("Unsupported Tensor.item() call", "m.py", 3, code="gb0124", hint="Set capture_scalar_outputs.",
                       source_text="y = x.item() + 1", lines=lambda p, n: lines.get((p, n)))
    assert format_diagnostics([d]) == (
        "m.py:3:5: GT-B001 graph break: Unsupported Tensor.item() call [gb0124]\n"
        "   |\n"
        " 3 |     y = x.item() + 1\n"
        "   |     ^^^^^^^^^^^^^^^^\n"
        "   = help: Set capture_scalar_outputs.\n"
        "   = see: https://meta-pytorch.github.io/compile-graph-break-site/gb/gb0124.html\n"
    )
    assert d.to_dict()["col"] == 5 and d.to_dict()["url"].endswith("gb0124.html")


def test_the_caret_stops_before_a_comment():
    # the caret ran under the whole line, the comment and its trailing spaces included
    lines = {("m.py", 6): "    if y.sum().item() > 0:  # branch on the sign   "}
    read = lambda p, n: lines.get((p, n))  # noqa: E731
    for d in (dg.graph_break("Unsupported Tensor.item() call", "m.py", 6, lines=read),
              dg.graph_break("Unsupported Tensor.item() call", "m.py", 6, source_text=lines[("m.py", 6)].strip(), lines=read)):
        assert format_diagnostics([d]).splitlines()[3] == "   |     " + "^" * len("if y.sum().item() > 0:")


def test_paths_are_relative_under_the_current_folder(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    d = dg.Diagnostic("GT-D001", "copy", str(tmp_path / "models" / "m.py"), 7)
    assert format_diagnostics([d]).startswith("models/m.py:7: GT-D001 copy")
    outside = dg.Diagnostic("GT-D001", "copy", "/elsewhere/m.py", 7)
    assert format_diagnostics([outside]).startswith("/elsewhere/m.py:7:")


def test_groups_have_one_line_headers():
    ds = [dg.Diagnostic("GT-D001", "a", "a.py", 1, model="a.py", region="region 0 forward"),
          dg.Diagnostic("GT-D001", "b", "a.py", 2, model="a.py", region="region 0 forward"),
          dg.Diagnostic("GT-D001", "c", "b.py", 1, model="b.py", region="region 1 backward")]
    text = render_text(diagnostics_view(ds), 80)
    assert text.splitlines()[0] == "a.py, region 0 forward: 2 findings"
    assert "b.py, region 1 backward: 1 finding" in text


@pytest.mark.parametrize("width", [20, 40, 80, 120])
def test_a_location_shorter_than_the_console_is_never_split(width):
    d = dg.Diagnostic("GT-B001", "graph break: " + "word " * 30, "examples/graph_breaks.py", 13, col=9)
    first = render_text(diagnostics_view([d]), width).splitlines()[0]
    assert first.startswith("examples/graph_breaks.py:13:9:" if width > 30 else "examples/graph_breaks.py:13:9"[:width])


def test_every_code_is_documented():
    from pathlib import Path

    doc = (Path(__file__).resolve().parents[2] / "docs" / "diagnostics.md").read_text()
    for code in dg.CODES:
        assert f"`{code}`" in doc, code


# ---- lint baselines as CI users expect (pytorch's check_graph_breaks.py) ----

def _baseline(*entries):
    return {"version": 2, "root": "/proj", "breaks": [dict(model="m.py", file="m.py", kind=k, source_text=t, line=n, reason=k)
                                                    for k, t, n in entries]}


def _result(*breaks):
    return LintResult(ok=True, graph_count=len(breaks) + 1,
                      breaks=tuple(BreakRecord(k, None, "/proj/m.py", n, t, None, 1) for k, t, n in breaks))


def test_with_a_baseline_the_budget_counts_new_breaks_only(monkeypatch):
    monkeypatch.chdir("/")
    target = LintTarget("/proj/m.py", budget=Budget(max_graph_breaks=0))
    known = _baseline(("print", "print(x)", 3))
    passed = judge(target, _result(("print", "print(x)", 3)), baseline=known)
    assert passed.passed, passed.failures  # was "1 graph breaks, budget 0": a baseline could never pass
    failed = judge(target, _result(("print", "print(x)", 3), ("item", "x.item()", 9)), baseline=known)
    assert failed.failures == ("1 new graph break, budget 0",)


def test_fixed_breaks_are_reported_and_strict_fails_on_them(monkeypatch):
    monkeypatch.chdir("/")
    target = LintTarget("/proj/m.py")
    known = _baseline(("print", "print(x)", 3), ("item", "x.item()", 9))
    loose = judge(target, _result(("print", "print(x)", 3)), baseline=known)
    assert loose.passed and [e["kind"] for e in loose.fixed] == ["item"]
    strict = judge(target, _result(("print", "print(x)", 3)), baseline=known, strict=True)
    assert not strict.passed
    assert strict.failures == ("1 baselined graph break no longer occurs (--strict): update the baseline",)
    text = render_text(lint_view(LintReport((strict,), baseline="gb.json")), 100)
    assert "GT-L002 fixed since the baseline: item" in text


def test_update_baseline_verdict_is_not_lint_failed():
    text = render_text(lint_view(v.LINT_FAILED, "baseline updated: wrote 3 graph breaks of 2 models to gb.json"), 80)
    assert "lint failed" not in text
    assert text.rstrip().endswith("baseline updated: wrote 3 graph breaks of 2 models to gb.json")


def test_mutations_allow_buffers():
    from graphtool.analysis.mutations import is_allowed

    text = render_text(v.mutations_view(v.MUTATIONS, allowed=("buffers",)), 200)
    assert "accepted by --allow buffers: model.layers.0.self_attn.k_cache, model.layers.0.self_attn.v_cache" in text
    assert "GT-M001 buffer" not in text
    assert "GT-M001 user input attention_mask" in text
    kept = [m.name for m in v.MUTATIONS.mutated if not is_allowed(m, ["buffers", "attention_*"])]
    assert kept == ["position_ids"]


def test_in_a_pipe_the_trace_header_is_whole():
    """The header's fields were cropped at 80 columns in a pipe ("... training  indu")."""
    first = piped(trace_view(v.TRACE)).splitlines()[0]
    assert first.endswith(f"torch {v.TRACE.torch_version}"), first
