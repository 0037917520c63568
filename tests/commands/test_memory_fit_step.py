"""``memory --fit --budgets`` on a whole training step compiled as one function (issue 44, item 1):
tests/fixtures/fit/gpt_step.py, a GPT-style decoder whose ``train_step`` (forward, loss, ``backward()``, AdamW,
``zero_grad``) is the model. Its two regions are the forward-and-loss graph with its backward, and AdamW's graph,
which runs after the backward: each belongs to its phase, the answer is the sweep's row at the default budget, the
step gets its eager row (the step run as written), and that row is torch's MemTracker's count of the same step.

One ``memory`` run, shared by the file (about 7 s of CPU: dynamo traces AdamW over every parameter). The graph
logic on hand-built graphs: tests/analysis/test_step_graphs.py; MemTracker's count of the step's phases on every
torch: tests/commands/test_memory_memtracker.py."""

from __future__ import annotations

import json
from importlib import resources

import pytest

from tests.helpers import FIXTURES

STEP = FIXTURES / "fit" / "gpt_step.py"

pytestmark = pytest.mark.slow  # one shared memory --fit --budgets of a whole step, 7 s of CPU: the slow tier (docs/ci.md)


@pytest.fixture(scope="module")
def fitted():
    from graphtool.commands.memory import memory

    (result,) = memory(str(STEP), fit="24GiB", budgets="1,0.5")
    return result


def test_each_graph_is_in_the_phase_it_runs_in(fitted):
    fit = fitted.fit
    by_region = {}
    for p in fit.timeline:
        by_region.setdefault(p.region, set()).add(p.phase)
    # region 0: the forward and loss, then its backward; region 1: AdamW's graph, after the backward
    assert by_region == {0: {"forward", "backward"}, 1: {"optimizer"}}
    phases = [p.phase for p in fit.timeline]
    assert phases == sorted(phases, key=["forward", "backward", "optimizer"].index)
    c = fit.compiled
    for phase in ("forward", "backward", "optimizer"):
        assert max(p.bytes for p in fit.timeline if p.phase == phase) == getattr(c, phase)
    top = max(fit.timeline, key=lambda p: p.bytes)
    assert (c.peak, c.phase) == (top.bytes, top.phase)
    # inductor writes AdamW's new parameters and state in place: the optimizer's phase holds what the backward
    # left (the gradients, the loss) over the parameters, inputs and state, and makes nothing of its own
    h = fit.held
    assert c.optimizer < c.backward and c.optimizer >= h.parameters + h.inputs + h.optimizer_state + h.gradients
    assert any("region 1" in n and "optimizer" in n for n in fit.notes)


def test_the_answer_is_the_sweeps_row_at_the_default_budget(fitted):
    fit = fitted.fit
    (default,) = [p for p in fit.budgets if p.budget == 1.0]

    def phases(step):
        return {k: v for k, v in step.to_dict().items() if k != "label"}

    assert phases(fit.compiled) == phases(default.step)
    assert fit.reduce_overhead == default.reduce_overhead
    assert f"predicted step peak {_mib(fit.compiled.peak)}" in fit.verdict
    assert f"reduce-overhead {_mib(fit.reduce_overhead.peak)}" in fit.verdict


def _mib(n: int) -> str:
    from graphtool.analysis.memory.saved import format_bytes

    return format_bytes(n)


def test_the_step_gets_its_eager_row_and_its_optimizers_state(fitted):
    import torch

    fit = fitted.fit
    assert fit.eager is not None and fit.eager.forward is None
    assert fit.eager.backward is not None and fit.eager.optimizer is not None
    # the step's own AdamW: two moments per parameter and a step counter each
    n = fitted.report.parameters.tensors
    assert n == 16 and fit.held.optimizer_state == 2 * fit.held.parameters + n * torch.tensor(0.0).element_size()
    assert fit.held.optimizer_step_peak > fit.held.optimizer_state  # AdamW's foreach temporaries on top
    assert fit.contributors[0].what == "optimizer state"
    assert f"; eager {_mib(fit.eager.peak)}" in fit.verdict


def test_the_eager_step_is_memtrackers_peak_with_each_difference_named(fitted):
    """MemTracker's peak of the same step (two calls on fake tensors), beside graphtool's eager row: the difference
    is graphtool's 512-byte rounding of what the step makes (MemTracker rounds only on CUDA; the test counts its
    run again rounded) and the input storage MemTracker never saw (graphtool holds the inputs)."""
    from tests.commands.test_memory_memtracker import memtracker_step_run

    fit = fitted.fit
    mt = memtracker_step_run(STEP)
    peak = mt["peak"]["Total"]
    rounding = max(v for v, _ in mt["rounded_peak"].values()) - peak
    assert fit.eager.phase == "optimizer"  # AdamW's foreach temporaries over the gradients: MemTracker's too
    assert fit.eager.peak == peak + rounding + mt["unseen_inputs"], (fit.eager.to_dict(), mt)
    assert mt["peak"]["PARAM"] == fit.held.parameters


def test_the_document_and_the_page(fitted):
    import jsonschema

    doc = fitted.to_dict()
    schema = json.loads(resources.files("graphtool.schema").joinpath("memory.schema.json").read_text())
    jsonschema.validate(doc, schema)
    assert doc["memory"]["eager_not_measured"] is None
    page = fitted.html()
    # the picture draws the optimizer's graph in its own colour, after the backward, named as its phase
    from graphtool.render.fit import _PHASE_COLOURS

    svg = page[page.index('<svg class="timeline"'):]
    svg = svg[:svg.index("</svg>")]
    colour = _PHASE_COLOURS["optimizer"]
    assert f'stroke="{colour}"' in svg and f'fill="{colour}" text-anchor="end">optimizer</text>' in svg
    top = max(fitted.fit.timeline, key=lambda p: p.bytes)
    assert f"at {top.node} ({top.phase})" in svg
