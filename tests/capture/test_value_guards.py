"""A Python number baked into a graph (issue 44, item 2): ``scale = h.std().item()`` ends a region, and the frame
resuming after the break guards on the value it was handed (``___stack0 == 0.2753``). torch recompiles when a loop
hands it another value; graphtool's stand-in runs the same value every step, so its steady state says that it assumes
so, and places the guard where the value is used (line 19), not where the resume frame begins (line 15)."""

from __future__ import annotations

import functools
import json

import pytest

from tests.helpers import FIXTURES

SCRIPT = FIXTURES / "values" / "item_scale.py"
READ_AT, USED_AT = 15, 19  # scale = h.std().item() / return self.out(h * scale)


@functools.cache
def _standin():
    """``graphtool cudagraphs`` on the script (3 steps on the meta stand-in): the result, its JSON, its text at 80 columns."""
    from graphtool.commands.cudagraphs import cudagraphs
    from tests.helpers.console import render_text

    (result,) = cudagraphs(str(SCRIPT))
    return result, result.to_dict(), render_text(result.view(), 80)


def _real_loop(new_value_each_step: bool):
    """The model under a real ``torch.compile`` (graphtool lint's recording backend) over 4 calls."""
    import torch

    from graphtool.capture.processes.lint_worker import lint_spec
    from graphtool.capture.user.script import load_model

    spec = load_model(str(SCRIPT))
    torch.manual_seed(1)
    calls = [(torch.randn(4, 8),) for _ in range(4)] if new_value_each_step else [spec.args] * 4
    return lint_spec(spec, calls=calls)


def test_the_steady_state_says_it_assumes_the_value_torch_guards_on():
    _result, doc, text = _standin()
    steady = doc["cudagraphs"]["steady_state"]
    [guard] = steady["value_guards"]
    assert (guard["read_at"], guard["line"], guard["type"], guard["name"]) == (READ_AT, USED_AT, "float", None)
    assert guard["file"].endswith("values/item_scale.py")
    assert steady["steady"] and steady["steady_from"] == 3  # the same value every step: steady, as torch is then
    said = "assumes the same value every step for the number read before the graph break at line 15, used at"
    assert said in steady["summary"] and "a step with another value compiles again" in steady["summary"]
    assert said in " ".join(text.split())  # the view at 80 columns, folded lines joined
    jsonschema = pytest.importorskip("jsonschema")
    from importlib import resources

    schema = json.loads(resources.files("graphtool.schema").joinpath("report.schema.json").read_text())
    jsonschema.validate(steady, schema["properties"]["cudagraphs"]["properties"]["steady_state"])


def test_torch_recompiles_on_a_new_value_at_the_guard_the_standin_named():
    """The truth: a real loop fed the same input never recompiles (the stand-in's steady state); fed a new batch each
    step, the value changes and the resume frame compiles again, its guard at the line the stand-in named."""
    same, changing = _real_loop(False), _real_loop(True)
    assert same.recompiles == () and same.graph_count == 2
    [recompile] = changing.recompiles
    assert recompile.function == f"torch_dynamo_resume_in_forward_at_{READ_AT}" and "___stack0 ==" in recompile.reason
    assert (recompile.file.endswith("values/item_scale.py"), recompile.line) == (True, USED_AT)  # lint placed it at 15
    _result, doc, _text = _standin()
    [guard] = doc["cudagraphs"]["steady_state"]["value_guards"]
    assert (guard["file"], guard["line"]) == (recompile.file, recompile.line)


@pytest.mark.one_torch
def test_lint_shows_the_recompile_at_the_line_that_uses_the_value():
    from graphtool.analysis import diagnostics as dg

    [recompile] = _real_loop(True).recompiles
    d = dg.recompile(recompile.function, recompile.file, recompile.line, recompile.reason)
    assert d.line == USED_AT and d.source.strip() == "return self.out(h * scale)"
    # torch's reason is one guard line, its source comment and user stack left to the diagnostic's own source line
    assert d.message.startswith(f"recompile of torch_dynamo_resume_in_forward_at_{READ_AT}: 1/0: ___stack0 == 0.")
    assert "\n" not in d.message and "User stack trace" not in d.message
