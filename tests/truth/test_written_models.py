"""Aliasing and no-grad mutations on models written for issue 24, against a real ``torch.compile``.

Each script in ``tests/fixtures/issue24`` is traced by graphtool and compiled for real by torch
(``aot_eager``: the same AOT metadata without inductor's code generation) while
:mod:`tests.truth.torch_truth` reads AOT's ViewAndMutationMeta. graphtool's model-level alias
findings must be ones AOT's ``output_info`` stands behind, and its ``under_no_grad`` must be AOT's
``mutations_under_no_grad_or_inference_mode``, training or not.
"""

from __future__ import annotations

import functools
from pathlib import Path

import pytest

from tests.truth import torch_truth as tt

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "issue24"
BACKEND = "aot_eager"
NOT_VIEWS = ("non_alias", "is_input", "unsafe_view_alias")


@functools.cache
def _both(name: str):
    from graphtool.capture.tracer import trace_model
    from graphtool.capture.user.script import load_model

    path = str(FIXTURES / f"{name}.py")
    run = tt.run_torch(path, BACKEND)
    assert run.error is None, f"{name}: the real torch.compile failed: {run.error}"
    cap = trace_model(load_model(path), backend=BACKEND)
    assert len(cap.regions) == len(run.regions), f"{name}: graphtool {len(cap.regions)} regions, torch {len(run.regions)}"
    return cap, run


@pytest.mark.slow
@pytest.mark.parametrize("name", ["lin3d", "kv_decode", "kv_function"])
def test_output_views_are_the_ones_aot_reports(name):
    """One region, its user outputs the model's outputs, none sharing storage with an input or another
    output: graphtool's is_view per output is AOT's word (a view made inside linear's decomposition is none)."""
    from graphtool.analysis.mutations import analyze_mutations

    cap, run = _both(name)
    (theirs,) = [r.meta for r in run.regions]
    report = analyze_mutations(cap)
    torch_says = [kind not in NOT_VIEWS for kind, _base in theirs.output_info]
    assert [o.is_view for o in report.model_outputs] == torch_says, (
        f"{name}: graphtool {[o.to_dict() for o in report.model_outputs]}, AOT output_info {theirs.output_info}")
    for o in report.aliased_outputs:
        if o.alias_of["kind"] == "intermediate":
            kind = theirs.output_info[o.index][0]
            assert kind.startswith("alias_of_intermediate"), f"{name}: output {o.index} flagged; AOT says {kind}"


@pytest.mark.slow
@pytest.mark.parametrize("name", ["kv_decode", "kv_function"])
def test_under_no_grad_is_aots_flag(name):
    """k_cache / v_cache written under @torch.no_grad(): AOT's mutations_under_no_grad_or_inference_mode."""
    from graphtool.analysis.mutations import analyze_mutations

    cap, run = _both(name)
    truth: dict[str, bool] = {}
    for mine, theirs in zip(cap.regions, run.regions):
        txt = theirs.graphs.get("aot_forward_graph") or theirs.graphs.get("aot_inference_graph") or ""
        for (_role, idx), info in zip(tt.aot_inputs(txt), theirs.meta.input_info):
            if info["mutates_data"] or info["mutates_metadata"] or info["mutates_storage"]:
                truth[mine.inputs[idx].name] = truth.get(mine.inputs[idx].name, False) or info["under_no_grad"]
    mine = {m.name: m.under_no_grad for m in analyze_mutations(cap).mutated}
    assert truth == {"k_cache": True, "v_cache": True}, f"{name}: torch's flags {truth}"
    assert mine == truth, f"{name}: graphtool {mine}, torch's ViewAndMutationMeta {truth}"
