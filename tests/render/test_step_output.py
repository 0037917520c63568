"""A whole training step compiled as one function (issue 44): its output stays readable.

A GPT-style step with 52 parameters and AdamW writes every parameter and 156 state tensors in place, and its
forward reads 52 parameters, its optimizer 52 parameters, 52 gradients and 156 state tensors. Before, ``mutations``
printed two lines of ~9,000 characters, ``trace`` about 330 placeholder rows, and the page had 211 findings that
buried the step's 3 graph breaks. The reports here are built by hand as the step's are (no torch, no trace): the
real step's facts are checked once in tests/commands/test_step_output_cli.py.
"""

from __future__ import annotations

import json

from graphtool.analysis.graph_summary import Source
from graphtool.analysis.mutations import InputMutation, MutationReport
from tests.helpers.console import render_text

STEP = "train.py"
LAYER = ("ln1.weight", "ln1.bias", "qkv.weight", "qkv.bias", "proj.weight", "proj.bias",
         "ln2.weight", "ln2.bias", "fc.weight", "fc.bias", "out.weight", "out.bias")
PARAMS = (["net.tok.weight", "net.pos.weight"] + [f"net.blocks.{i}.{p}" for i in range(4) for p in LAYER]
          + ["net.ln_f.weight", "net.ln_f.bias"])
STATES = [f"opt.state[{p}].{k}" for p in PARAMS for k in ("step", "exp_avg", "exp_avg_sq")]


def _written(name: str, kind: str, line: int = 55) -> InputMutation:
    # an input of region 0 (the forward) and region 1 (the optimizer), written by region 1's graph only
    regions = (0, 1) if kind == "parameter" else (1,)
    return InputMutation(name, kind, True, False, False, True, Source(STEP, line), regions, mutated_in=(1,), by_optimizer=True)


def step_mutations(extra: tuple[InputMutation, ...] = ()) -> MutationReport:
    return MutationReport(tuple(_written(p, "parameter") for p in PARAMS) + tuple(_written(s, "optimizer_state") for s in STATES)
                          + extra, (), ())


def test_the_fixture_is_the_issues_step():
    assert (len(PARAMS), len(STATES)) == (52, 156)


# ---- mutations -------------------------------------------------------------------------------------------


def test_what_the_optimizer_writes_is_one_finding_that_says_it_is_expected():
    from graphtool.analysis.diagnostics import mutation_diagnostics

    diags = mutation_diagnostics(step_mutations(), lines=lambda path, line: None)
    assert len(diags) == 1  # was two: 52 parameters, then 156 optimizer states, each naming every tensor
    (d,) = diags
    assert d.message == "the optimizer step updates 52 parameters and 156 state tensors in place, as expected"
    assert (d.path, d.line, d.region, d.severity) == (STEP, 55, "region 1", "note")
    assert "--allow optimizer_state" in d.help  # never suggested before
    assert "inside forward" not in d.help  # said of the opt.step() line before


def test_the_verdict_says_what_the_step_does():
    rep = step_mutations()
    assert rep.verdict() == "the optimizer step updates 52 parameters and 156 state tensors in place, as expected"


def test_mutations_lines_fit_the_terminal_and_a_pipe_keeps_them_short():
    from graphtool.render.mutations import mutations_view

    view = mutations_view(step_mutations())
    at_80 = render_text(view, 80)
    assert max(map(len, at_80.splitlines())) <= 80
    assert len(at_80.splitlines()) <= 10, at_80
    piped = render_text(view, 10_000)  # a pipe: nothing is laid out, each line whole
    assert max(map(len, piped.splitlines())) < 300, piped  # two lines of ~9,000 characters before
    assert "net.blocks.3.out.bias" not in piped  # the names are in JSON, not in the terminal


def test_json_lists_every_tensor_with_the_region_that_writes_it():
    doc = step_mutations().to_dict()
    inputs = doc["mutations"]["inputs"]
    assert len(inputs) == 208
    p = next(m for m in inputs if m["name"] == "net.tok.weight")
    assert (p["regions"], p["mutated_in"], p["by_optimizer"]) == ([0, 1], [1], True)
    json.dumps(doc)


def test_allow_optimizer_state_accepts_the_parameters_the_optimizer_updates():
    from graphtool.analysis.mutations import is_allowed
    from graphtool.render.mutations import mutations_view

    own = InputMutation("net.scale", "parameter", True, False, False, False, Source(STEP, 20), (0,), mutated_in=(0,))
    rep = step_mutations((own,))
    assert [m.name for m in rep.mutated if not is_allowed(m, ["optimizer_state"])] == ["net.scale"]
    text = render_text(mutations_view(rep, allowed=("optimizer_state",)), 80)
    assert "accepted by --allow optimizer_state: the optimizer step updates 52 parameters and 156 state" in " ".join(text.split())
    assert "parameter net.scale mutated in place" in text and "changed inside forward" in text


def test_many_mutations_of_one_kind_at_one_line_name_a_few_and_count_the_rest():
    from graphtool.analysis.diagnostics import mutation_diagnostics

    caches = tuple(InputMutation(f"layers.{i}.k_cache", "buffer", True, False, False, True, Source("m.py", 9), (0,), mutated_in=(0,))
                   for i in range(40))
    (d,) = mutation_diagnostics(MutationReport(caches, (), ()), lines=lambda path, line: None)
    assert d.message.startswith("40 buffers mutated in place under no_grad: layers.0.k_cache, ")
    assert d.message.endswith(" more (--format json lists them all)") and len(d.message) < 200


# ---- the page --------------------------------------------------------------------------------------------


def test_the_page_lists_the_graph_breaks_above_one_finding_for_the_optimizer():
    from graphtool.analysis.findings import NodeIndex, build_findings
    from graphtool.analysis.trace_report import BreakInfo, TraceReport

    breaks = (BreakInfo("Unsupported Tensor.backward() call", "gb0123", STEP, 54),
              BreakInfo("Call to `torch._dynamo.graph_break()`", "gb0025", "torch/optim/optimizer.py", 79),
              BreakInfo("Attempted to inline function marked as skipped", "gb0008", STEP, 56))
    trace = TraceReport("0", "2.13", STEP, "model", "cpu", True, (), breaks, step_mutations())
    findings = build_findings(trace, breaks, None, None, NodeIndex({}))
    assert [f.kind for f in findings] == ["graph-break"] * 3 + ["mutation"]  # 211 findings before
    assert findings[-1].message == "the optimizer step updates 52 parameters and 156 state tensors in place, as expected"


def test_the_pages_mutations_say_which_region_writes_each_tensor():
    from graphtool.render.report import mutations_section

    page = mutations_section(step_mutations())
    assert "<td>0, 1</td>" not in page  # the forward reads the parameters; region 1, the optimizer, writes them
    assert page.count("<td>1</td>") == 208
    assert "<details" in page and "the optimizer step updates 52 parameters" in page


# ---- trace -----------------------------------------------------------------------------------------------


def step_trace():
    """The step's two regions as trace reports them: the forward reads 52 parameters and the two inputs; the
    optimizer's graph 52 parameters, 156 state tensors and 52 gradients (330 placeholder rows before)."""
    from graphtool.analysis.graph_summary import GraphSummary, Placeholder
    from graphtool.analysis.trace_report import BreakInfo, RegionReport, TraceReport

    def ph(i, kind, name, shape=(32,)):
        return Placeholder(name, kind, name if kind == "parameter" else None, f"arg{i}_1", shape, "float32", "cpu")

    forward = [ph(0, "parameter", PARAMS[0], (64, 32)), ph(1, "user_input", "idx", (2, 16))]
    forward += [ph(i + 2, "parameter", p) for i, p in enumerate(PARAMS[1:])] + [ph(53, "user_input", "targets", (2, 16))]
    optim = ([ph(i, "parameter", p) for i, p in enumerate(PARAMS)] + [ph(52 + i, "optimizer_state", s, ()) for i, s in enumerate(STATES)]
             + [ph(208 + i, "gradient", p + ".grad") for i, p in enumerate(PARAMS)])
    regions = (RegionReport(0, GraphSummary("forward", 300, {"aten.mm": 20}, tuple(forward), (), ()), None),
               RegionReport(1, GraphSummary("forward", 1500, {"aten._foreach_add_.Scalar": 2}, tuple(optim), (), ()), None))
    breaks = (BreakInfo("Unsupported Tensor.backward() call", "gb0123", STEP, 54),)
    return TraceReport("0", "2.13.0", STEP, "model", "cpu", True, regions, breaks, step_mutations())


def test_trace_folds_many_placeholders_of_one_kind_into_one_counted_row():
    from graphtool.render.trace import trace_view

    text = render_text(trace_view(step_trace()), 100)
    assert len(text.splitlines()) < 60, text  # ~330 placeholder rows before
    assert "(52 parameters)" in text and "(156 optimizer state tensors)" in text and "(52 gradients)" in text
    assert "opt.state[net.ln_f.bias].exp_avg" not in text
    assert "idx" in text and "targets" in text  # a kind with a few placeholders keeps its rows
    assert "folded: 52 parameters, 156 optimizer state tensors, 52 gradients (--verbose lists every one)" in text


def test_trace_verbose_lists_every_placeholder():
    from graphtool.render.trace import trace_view

    text = render_text(trace_view(step_trace(), verbose=True), 100)
    assert all(name in text for name in PARAMS + STATES)
    assert "folded" not in text


def test_trace_quiet_is_the_summary_line_alone():
    from graphtool.commands.trace import TraceResult

    result = TraceResult("train.py", step_trace())
    assert render_text(result.view(quiet=True), 100).splitlines() == [
        "2 compiled regions, 1 graph break, 0 skipped frames, 208 inputs mutated"]
