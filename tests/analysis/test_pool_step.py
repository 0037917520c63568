"""The reduce-overhead pool, on two hand-built graphs whose allocations can be followed by hand
(graphtool/analysis/memory/pool_step.py): the warm-up and the recording, the cuBLAS workspace held from a graph's
first matmul to its end, pointwise producers fused into their reader, saved activations freed inside the backward
(AOT autograd hands them over), the input batch and the tangent copied into the recording's static inputs.
The same code against the H200's pools: tests/commands/test_memory_fit_h200.py."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from graphtool.analysis.memory.pool_step import pool_reserved  # noqa: E402
from graphtool.analysis.memory.step_peak import fused_away, timeline  # noqa: E402

MiB = 2**20
aten = torch.ops.aten


def _node(g, target, args, val):
    n = g.create_node("call_function", target, args, name=target.__name__.split(".")[0])
    n.meta["val"] = val
    return n


def graphs():
    """forward: mm = x @ w; relu(mm * 2), returned to the user; mm saved. backward: where(mm <= 0, 0, tangent),
    then a matmul for the gradient. Every tensor 1024 x 1024 float32 (4 MiB), ``le``'s bool 1 MiB."""
    f32 = torch.empty(1024, 1024, device="meta")
    fw = torch.fx.Graph()
    x, w = fw.placeholder("x"), fw.placeholder("w")
    x.meta["val"] = w.meta["val"] = f32
    mm = _node(fw, aten.mm.default, (x, w), f32)
    mul = _node(fw, aten.mul.Tensor, (mm, 2), f32)
    relu = _node(fw, aten.relu.default, (mul,), f32)
    fw.output((relu, mm))
    bw = torch.fx.Graph()
    saved, tangent = bw.placeholder("mm"), bw.placeholder("tangents_1")
    saved.meta["val"] = tangent.meta["val"] = f32
    le = _node(bw, aten.le.Scalar, (saved, 0), torch.empty(1024, 1024, dtype=torch.bool, device="meta"))
    zero = _node(bw, aten.zeros_like.default, (tangent,), f32)
    where = _node(bw, aten.where.self, (le, zero, tangent), f32)
    grad = _node(bw, aten.mm.default, (where, where), f32)
    bw.output((grad,))
    return [(torch.fx.GraphModule({}, fw), torch.fx.GraphModule({}, bw))]


def test_the_pool_followed_by_hand():
    # warm-up: workspace 32 MiB (segment A), mm and relu in a 20 MiB segment B; the backward reuses both. Recording:
    # the batch x (4 MiB) first in B, mm, relu, the tangent's copy and where fill B; mm is freed inside the
    # backward, so the gradient takes its block: A 32 MiB + B 20 MiB
    assert pool_reserved(graphs(), inputs=4 * MiB, workspace=32 * MiB) == 52 * MiB


def test_what_the_pool_counts():
    (fw, bw), = graphs()
    assert fused_away(fw) == {"mul"}  # relu is returned: written; mul is computed inside relu's kernel
    assert fused_away(bw) == {"le", "zeros_like"}  # where reads them in its own kernel
    # without a workspace the 32 MiB segment is not there
    assert pool_reserved(graphs(), inputs=4 * MiB, workspace=0) == 20 * MiB
    # a 16 MiB batch takes most of B (best fit, 4 MiB left for mm): relu, the tangent and where need a second
    # 20 MiB segment; mm's block, freed inside the backward, takes the gradient
    assert pool_reserved(graphs(), inputs=16 * MiB, workspace=0) == 40 * MiB


def test_the_plain_timeline_is_unchanged_by_fusion_rules():
    (fw, bw), = graphs()
    plain = timeline(fw, held={"x", "w"})
    assert (plain.peak, plain.end) == (12 * MiB, 8 * MiB)  # mm, mul, relu live together before mul is freed
    fused = timeline(fw, held={"x", "w"}, fuse=True)
    assert (fused.peak, fused.end) == (8 * MiB, 8 * MiB)
