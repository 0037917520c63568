"""CPU truth for ``graphtool shapes`` (issue 34): a real ``torch.compile`` loop over the schedules of
tests/truth/gpu/shapes_truth.py (tests/fixtures/shapes/: a tiny Llama over 16 sequence lengths in training and
inference, a CNN over a short last batch, a decode step over a growing KV cache), with a backend that only counts
what dynamo hands it, against graphtool's prediction on the meta stand-in: after each step, the graphs dynamo
compiled so far; which steps ran a compiled graph (past ``recompile_limit`` a new size runs eagerly); the guard
failures; whether the limit was hit. Per variant: torch's default (automatic dynamic), ``mark_dynamic`` on the
dimension that changes, ``dynamic=True``, ``dynamic=False``; and ``torch.compiler.set_stance`` from the second step
(``eager_on_recompile``, ``force_eager``: graphtool's ``--stance``) for the CNN and the decode step."""

from __future__ import annotations

import functools

import pytest

from tests.analysis.shapes_cases import FIXTURES, INFERENCE, MARKS, marks, predict

VARIANTS = ["auto", "mark_dynamic", "dynamic_true", "dynamic_false"]
MODELS = ["decoder_train", "decoder_infer", "cnn_last_batch", "kv_decode"]
STANCES = ["eager_on_recompile", "force_eager"]
#: under 2 s each here (the stances stop compiling after step 1)
FAST = {("kv_decode", "auto")} | {(m, v) for m in ("cnn_last_batch", "kv_decode") for v in STANCES}
#: where the CPU itself differs from the GPU the stand-in stands for: the CPU's conv fake kernel guards
#: ``16 <= args[0].size()[0]`` (a CPU-only kernel choice), so a marked batch of 7 recompiles on the CPU; the H200 and
#: H100 compiled 1 graph, as graphtool predicts (tests/analysis/test_shapes_gpu_agreement.py)
CPU_ONLY_GRAPHS = {("cnn_last_batch", "mark_dynamic"): 2}


@functools.cache
def real_loop(model: str, variant: str) -> dict:
    """Run the fixture's schedule through ``torch.compile`` on the CPU: per step, graphs compiled so far and
    whether a compiled graph ran; the recompile reasons; dynamo's frame counters."""

    import torch
    from torch._dynamo.utils import counters

    from graphtool.capture.user.script import load_model

    spec = load_model(str(FIXTURES / f"{model}.py"))
    module = __import__("sys").modules[spec.module_name]
    state = {"step": 0}
    compiled_at: list[int] = []
    ran: set[int] = set()

    def counting(gm, example_inputs):
        compiled_at.append(state["step"])

        def run(*args):
            ran.add(state["step"])
            return gm.forward(*args)
        return run

    torch._dynamo.reset()
    counters.clear()
    dynamic = {"dynamic_true": True, "dynamic_false": False}.get(variant)
    fn = torch.compile(spec.model, backend=counting, dynamic=dynamic)
    reasons = []
    try:
        _steps(spec, module, model, variant, fn, state)
    finally:
        torch.compiler.set_stance("default")
    for key, n in counters["recompiles"].items() if "recompiles" in counters else ():
        reasons.append((key, n))
    steps = state["step"]
    return {"compiled": [sum(1 for s in compiled_at if s <= k) for k in range(1, steps + 1)],
            "ran": sorted(ran), "steps": steps, "frames": dict(counters["frames"])}


def _steps(spec, module, model: str, variant: str, fn, state: dict) -> None:
    import dataclasses

    import torch

    from graphtool.capture.schedule import _normalize
    from graphtool.capture.user.input_names import all_named_inputs

    for k, item in enumerate(module.get_input_schedule()):
        if variant in STANCES and k == 1:
            torch.compiler.set_stance(variant)  # after the first step, as graphtool's --stance
        args, kwargs = _normalize(spec, item, k + 1, "schedule")
        if variant == "mark_dynamic":
            named = dict(all_named_inputs(dataclasses.replace(spec, args=args, kwargs=kwargs)))
            for mark in MARKS[model]:
                name, dim = mark.split(":")
                torch._dynamo.mark_dynamic(named[name], int(dim))
        state["step"] = k + 1
        for p in spec.model.parameters():
            p.grad = None
        if model in INFERENCE:
            with torch.no_grad():
                fn(*args, **kwargs)
        else:
            out = fn(*args, **kwargs)
            loss = out.loss if hasattr(out, "loss") and out.loss is not None else out.sum()
            loss.backward()


CASES = [pytest.param(m, v, marks=marks(m, v, (m, v) in FAST)) for m in MODELS for v in VARIANTS] + [
    pytest.param(m, v, marks=marks(m, v, (m, v) in FAST)) for m in ("cnn_last_batch", "kv_decode") for v in STANCES]


@pytest.mark.parametrize("model,variant", CASES)
def test_compiles_and_eager_steps_agree_with_a_real_loop(model, variant):
    truth = real_loop(model, variant)
    report = predict(model, variant)
    assert report.steps == truth["steps"]
    if (model, variant) in CPU_ONLY_GRAPHS:
        assert truth["compiled"][-1] == CPU_ONLY_GRAPHS[(model, variant)] and report.graphs_compiled == 1
        return
    compiled, total = [], 0
    for s in report.per_step:
        total += s.graphs_compiled
        compiled.append(total)
    assert compiled == truth["compiled"]
    assert [s.step for s in report.per_step if not s.eager] == truth["ran"]
    limit_hit = truth["frames"].get("total", 0) > truth["frames"].get("ok", 0)
    assert (report.limit_step is not None) == limit_hit
    # every graph after the first is a guard failure, and so is the attempt the limit refused
    assert report.recompiles == compiled[-1] - 1 + limit_hit


def test_the_recompile_limit_is_said_loudly():
    report = predict("kv_decode", "auto")
    assert report.loud() is None  # automatic dynamic: 3 graphs, no fallback
