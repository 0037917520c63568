"""``graphtool shapes`` on loops as people write them (issue 44, items 3 and 4): an eval() encoder served under
``torch.no_grad()`` is predicted as inference, and says so; a KV-cache decode loop names the integer ``pos`` that
changes every step, tells its values apart from the tensor sizes, and advises a fixed-size cache with ``pos`` a tensor."""

from __future__ import annotations

import functools
import json

from tests.helpers import FIXTURES

VALUES = FIXTURES / "values"


@functools.cache
def _shapes(name: str, **flags):
    """One prediction per fixture (no advice: the scalar advice is computed from the report as the command does)."""
    from graphtool.commands.shapes import shapes

    (result,) = shapes(str(VALUES / name), advise=False, **flags)
    return result


def _text(report, width: int = 80) -> str:
    from graphtool.render.shapes import shapes_view
    from tests.helpers.console import render_text

    return render_text(shapes_view(report), width)


def test_an_eval_encoder_served_under_no_grad_is_predicted_as_inference_and_says_so():
    # no --inference: the schedule's `with torch.no_grad():` is open where each step is yielded, as in the user's loop
    report = _shapes("eval_encoder.py").report
    # one graph a step (the inference graph): training predicted a backward recording after each forward
    assert [(s.warmups, s.recordings) for s in report.per_step] == [(1, 0), (1, 0), (1, 0), (0, 1)]
    assert report.mode == "inference" and "gradients off (torch.no_grad()); the model is in eval()" in report.mode_why
    lines = _text(report).splitlines()
    assert lines[1].startswith("inference: the schedule yields every step with gradients off")
    assert "after the backward" not in "\n".join(lines)
    doc = _shapes("eval_encoder.py").to_dict()
    assert doc["shapes"]["mode"] == "inference" and doc["shapes"]["mode_why"] == report.mode_why
    assert json.loads(json.dumps(doc))["model"]["training"] is False  # the module's own flag, as trace reports it


def test_a_decode_loop_names_pos_and_tells_its_values_from_the_sizes():
    report = _shapes("kv_pos_decode.py").report
    assert report.mode == "inference"  # the schedule yields under no_grad
    [pos] = report.scalars
    assert (pos.name, pos.type, pos.distinct, pos.every_step) == ("pos", "int", 11, True)
    assert pos.graph_input == "region 1's inference graph"  # automatic dynamic made it the graph's integer input
    assert report.per_step[2].values == {"pos": 9} and report.step_line(report.per_step[2]).startswith("step 3  x:1=1 pos=9  ")
    assert report.headline().startswith("over 11 steps (2 distinct sizes of x:1; pos takes 11 values, a new one every step)")
    [warning] = report.warnings  # torch's "9 distinct sizes" are pos's values, not the 2 sizes of x
    assert "reaches 9 distinct sizes (its integer input: pos), past cudagraph_dynamic_shape_warn_limit (8)" in warning
    assert report.graphed_steps == 0  # the verdict was right already: no step runs a CUDA graph
    doc = report.to_dict()
    assert doc["scalars"] == [pos.to_dict()] and doc["per_step"][2]["values"] == {"pos": 9}


def test_a_decode_loop_gets_the_fixed_cache_advice_apart_from_the_checked_kind():
    from dataclasses import replace

    from graphtool.analysis.shapes import scalar_advice

    report = _shapes("kv_pos_decode.py").report
    [advice] = scalar_advice(report)
    assert advice.kind == "scalar_input" and not advice.predicted and advice.to_dict()["predicted"] is False
    assert advice.text.startswith("pos changes every step (11 values): it is an integer input of region 1's inference graph")
    assert "fixed-size cache" in advice.text and "pos passed as a tensor" in advice.text
    text = " ".join(_text(replace(report, advice=(advice,))).split())
    assert "advice (a change to the model's code, not predicted): - pos changes every step" in text
    assert "each checked by predicting" not in text


def test_torch_takes_pos_as_an_integer_input_after_one_recompile():
    """The truth on the CPU: a real torch.compile of the loop (under no_grad, as the script yields) compiles twice, the
    second graph taking ``pos`` as a SymInt, and never again over the other 9 values."""
    import sys

    import torch

    from graphtool.capture import compat
    from graphtool.capture.user.script import load_model

    spec = load_model(str(VALUES / "kv_pos_decode.py"))
    module = sys.modules[spec.module_name]
    seen = []

    def keep(gm, example_inputs):
        seen.append([type(x).__name__ for x in example_inputs if not isinstance(x, torch.Tensor)])
        return gm.forward

    compat.dynamo_reset()
    compiled = torch.compile(spec.model, backend=keep)
    steps = 0
    for x, pos in module.get_input_schedule():
        compiled(x, pos)
        steps += 1
    compat.dynamo_reset()
    assert steps == 11 and seen == [[], ["SymInt"]]
    report = _shapes("kv_pos_decode.py").report
    assert report.graphs_compiled == len(seen) and report.recompiles == 1
