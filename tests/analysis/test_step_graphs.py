"""A whole training step's graphs by phase (issue 44, item 1), on hand-built graphs whose bytes can be followed by
hand: the model's forward and backward, then the optimizer's graph (an inference graph that reads the gradients
and the optimizer's state and writes them back with ``copy_``), which runs after the backward, in the optimizer's
phase, and which inductor compiles in place. The same on a real step: tests/commands/test_memory_fit_step.py."""

from __future__ import annotations

import operator
from types import SimpleNamespace as Ns

import pytest

torch = pytest.importorskip("torch")

from graphtool.analysis.memory.fit_report import Held, compiled_step, reduce_overhead_step  # noqa: E402
from graphtool.analysis.memory.pool_step import pool_reserved  # noqa: E402
from graphtool.analysis.memory.step_graphs import StepGraphs, step_graphs  # noqa: E402
from graphtool.analysis.memory.step_peak import fused_away, timeline  # noqa: E402

MiB = 2**20
aten = torch.ops.aten
BIG = torch.empty(1024, 1024, device="meta")  # 4 MiB


def _node(g, target, args, val, name=None):
    n = g.create_node("call_function", target, args, name=name or target.__name__.split(".")[0])
    n.meta["val"] = val
    return n


def _placeholders(g, **vals):
    out = []
    for name, val in vals.items():
        p = g.placeholder(name)
        p.meta["val"] = val
        out.append(p)
    return out


def model_graphs():
    """forward: mm = x @ w (saved), its sum the loss. backward: the gradient of w, mm @ the tangent expanded."""
    fw = torch.fx.Graph()
    x, w = _placeholders(fw, x=BIG, w=BIG)
    mm = _node(fw, aten.mm.default, (x, w), BIG)
    loss = _node(fw, aten.sum.default, (mm,), torch.empty((), device="meta"))
    fw.output((loss, mm))
    bw = torch.fx.Graph()
    saved, tangent = _placeholders(bw, mm=BIG, tangents_1=torch.empty((), device="meta"))
    grown = _node(bw, aten.expand.default, (tangent, [1024, 1024]), BIG.expand(1024, 1024))
    grad = _node(bw, aten.mm.default, (saved, grown), BIG)
    bw.output((grad,))
    return torch.fx.GraphModule({}, fw), torch.fx.GraphModule({}, bw)


def optimizer_graph():
    """SGD with momentum as AOT keeps it in the graph: ``m = 0.9 * m + g`` and ``w = w - m``, each a foreach op
    whose result is written back into the input with ``copy_``."""
    g = torch.fx.Graph()
    w, grad, m = _placeholders(g, w=BIG, grad=BIG, m=BIG)
    scaled = _node(g, aten._foreach_mul.Scalar, ([m], 0.9), [BIG], "_foreach_mul")
    m0 = _node(g, operator.getitem, (scaled, 0), BIG, "getitem")
    added = _node(g, aten._foreach_add.List, ([m0], [grad]), [BIG], "_foreach_add")
    m1 = _node(g, operator.getitem, (added, 0), BIG, "getitem_1")
    stepped = _node(g, aten._foreach_sub.List, ([w], [m1]), [BIG], "_foreach_sub")
    w1 = _node(g, operator.getitem, (stepped, 0), BIG, "getitem_2")
    _node(g, aten.copy_.default, (m, m1), BIG, "copy_")
    _node(g, aten.copy_.default, (w, w1), BIG, "copy__1")
    g.output(())
    return torch.fx.GraphModule({}, g)


def region(index, forward, backward, *kinds):
    return Ns(index=index, forward=forward, backward=backward, forward_inputs=[Ns(ref=Ns(kind=k)) for k in kinds])


HELD = Held(parameters=4 * MiB, gradients=4 * MiB, buffers=0, inputs=4 * MiB, optimizer_state=4 * MiB,
            optimizer_step_peak=None, workspace=0)


@pytest.fixture(scope="module")
def step():
    fw, bw = model_graphs()
    opt = optimizer_graph()
    trace = Ns(regions=[region(0, fw, bw, "user_input", "parameter"),
                        region(1, opt, None, "parameter", "gradient", "optimizer_state")])
    return step_graphs(trace)


def test_the_optimizers_graph_is_the_optimizer_phase(step):
    assert [i for i, _, _ in step.model] == [0] and [i for i, _ in step.optimizer] == [1]
    got, _, points = compiled_step("compiled", HELD, step)
    steady = HELD.steady  # parameters, inputs and the optimizer's state: 12 MiB
    # forward: mm (4 MiB) and the loss (512 bytes); backward: the saved mm, the tangent and the gradient
    assert got.forward == steady + 4 * MiB + 512
    assert got.backward == steady + 512 + 4 * MiB + 512 + 4 * MiB
    # the optimizer: the gradient the backward made and the loss the step still holds; its graph makes nothing
    assert got.optimizer == steady + 4 * MiB + 512
    assert (got.peak, got.phase) == (got.backward, "backward")
    assert {(p.phase, p.region) for p in points} == {("forward", 0), ("backward", 0), ("optimizer", 1)}
    assert [p.phase for p in points] == sorted((p.phase for p in points), key=["forward", "backward", "optimizer"].index)
    assert max(p.bytes for p in points if p.phase == "optimizer") == got.optimizer


def test_a_model_without_a_compiled_optimizer_keeps_the_measured_one():
    fw, bw = model_graphs()
    held = Held(4 * MiB, 4 * MiB, 0, 4 * MiB, 4 * MiB, 9 * MiB, 0)  # get_optimizer's step, measured: 9 MiB
    got, _, points = compiled_step("compiled", held, StepGraphs(((0, fw, bw),)))
    assert got.optimizer == 4 * MiB + 4 * MiB + 4 * MiB + 9 * MiB  # parameters, inputs, gradients, its own peak
    assert (points[-1].phase, points[-1].region, points[-1].node) == ("optimizer", None, "optimizer.step()")


def test_an_optimizer_step_compiles_in_place():
    """Inductor compiled AdamW's whole foreach step (tests/fixtures/fit/gpt_step.py) into one kernel with no
    buffer in its CPU output code: foreach ops fuse, and the value ``copy_`` writes back is computed in place."""
    opt = optimizer_graph()
    held = {"w", "grad", "m"}
    assert fused_away(opt, optimizer=True) == {"_foreach_mul", "_foreach_add", "_foreach_sub"}
    assert fused_away(opt) == set()  # a model's graph: foreach ops and copy_ are not fused there
    assert timeline(opt, held=held, fuse=True, optimizer=True).peak == 0
    assert timeline(opt, held=held).peak == 8 * MiB  # the ATen walk materialises each new value


def test_reduce_overhead_runs_the_optimizer_in_the_pool(step):
    fw, bw = model_graphs()
    ro = reduce_overhead_step(HELD, step)
    # the optimizer's graph adds no block to the pool (it writes in place), and its phase is held bytes + the pool
    assert ro.pool == pool_reserved([(fw, bw)], inputs=HELD.inputs, workspace=0)
    assert ro.optimizer == HELD.parameters + HELD.inputs + HELD.optimizer_state + ro.pool


def test_saved_views_of_one_storage_are_one_block():
    """q, k and v split from one projection's output and saved for the backward are three placeholders over one
    storage: one block, live until the last of them is read (counted once each, the step was under-counted
    after the first was freed)."""
    base = torch.empty(3, 1024, 1024, device="meta")
    q, k, v = base.unbind(0)
    g = torch.fx.Graph()
    pq, pk, pv = _placeholders(g, q=q, k=k, v=v)
    a = _node(g, aten.mm.default, (pq, pk), BIG)
    b = _node(g, aten.mm.default, (a, pv), BIG)
    g.output((b,))
    tl = timeline(torch.fx.GraphModule({}, g), held=set())
    assert tl.start == 12 * MiB  # the storage once, not three times
    assert tl.peak == 12 * MiB + 8 * MiB and tl.end == 4 * MiB  # freed after v's last read, with a
