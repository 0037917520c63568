"""The whole GPT-style training step of issue 44 (tests/fixtures/train_step/gpt_step.py: 52 parameters, AdamW),
traced once for real: what its optimizer writes is told apart from what a forward writes, by the region that
writes it, and ``trace``'s output stays short (tests/render/test_step_output.py checks the views on hand-built
reports). aot_eager's AOT stage: the same dynamo graphs and mutations as inductor's, in half the time."""

from __future__ import annotations

from pathlib import Path

import pytest

STEP = Path(__file__).resolve().parents[1] / "fixtures" / "train_step" / "gpt_step.py"


def _line(text: str) -> int:
    return next(i for i, ln in enumerate(STEP.read_text().splitlines(), 1) if ln.strip() == text)


@pytest.fixture(scope="module")
def step():
    from graphtool.commands.trace import trace

    (result,) = trace(str(STEP), backend="aot_eager")
    return result


@pytest.mark.slow  # one trace of the whole step, ~8 s of CPU: the slow tier (docs/ci.md)
def test_the_optimizer_writes_every_parameter_and_its_state_in_the_optimizer_region(step):
    m = step.report.mutations
    params = [x for x in m.mutated if x.kind == "parameter"]
    states = [x for x in m.mutated if x.kind == "optimizer_state"]
    assert (len(params), len(states), len(m.mutated)) == (52, 156, 208)
    assert all(x.by_optimizer for x in m.mutated)  # torch/optim on each write's stack
    assert {x.regions for x in params} == {(0, 1)} and {x.mutated_in for x in m.mutated} == {(1,)}  # "0, 1" before
    assert {x.source.line for x in m.mutated} == {_line("opt.step()")}
    assert m.verdict() == "the optimizer step updates 52 parameters and 156 state tensors in place, as expected"


@pytest.mark.slow
def test_the_steps_diagnostics_and_findings_put_the_graph_breaks_first(step):
    from graphtool.analysis.diagnostics import mutation_diagnostics
    from graphtool.analysis.findings import NodeIndex, build_findings

    (d,) = mutation_diagnostics(step.report.mutations)
    assert d.line == _line("opt.step()") and "--allow optimizer_state" in d.help and len(d.message) < 100
    findings = build_findings(step.report, step.report.breaks, None, None, NodeIndex({}))
    assert [f.kind for f in findings] == ["graph-break"] * 3 + ["mutation"]  # 211 findings before


@pytest.mark.slow
def test_trace_of_the_step_is_short_and_quiet_is_one_line(step):
    from tests.helpers.console import render_text

    text = render_text(step.view(), 80)
    assert len(text.splitlines()) < 100, text  # 383 lines before, ~330 of them placeholders
    assert "folded: 52 parameters, 156 optimizer state tensors, 52 gradients" in text
    verbose = render_text(step.view(verbose=True), 80)
    assert "opt.state[net.ln_f.bias].exp_avg_sq" in verbose and len(verbose.splitlines()) > 300
    assert render_text(step.view(quiet=True), 200).splitlines() == [step.summary()]


@pytest.mark.slow
def test_the_cli_prints_the_summary_alone_with_quiet(cli):
    from tests.helpers import example

    rc, out, err = cli("trace", example("mlp.py"), "--backend", "aot_eager", "--inference", "--quiet")
    assert rc == 0, err
    assert out.splitlines() == ["1 compiled region, 0 graph breaks, 0 skipped frames, 0 inputs mutated"]
