"""Inference graphs, node for node, against what inductor's AOT stage hands its inner compiler.

torch side: a real ``torch.compile(model, backend=...)`` under ``torch.no_grad()`` whose backend is
inductor's own ``compile_fx`` with ``inner_compile`` (inductor's lowering) replaced by a recorder
that keeps each graph it receives and runs it unchanged. graphtool side: ``trace_model(spec,
inference=True)``. Per region, the nodes of the two inference graphs (op kind and target, in order)
must be the same list.

Models: an ``nn.MultiheadAttention`` block with a key padding mask, a transformers Mistral decode step
on a StaticCache, and a two-region decoder with complex RoPE writing a KV cache. The MHA block is
cheap and stays in the default run; the others are ``slow``.
"""

from __future__ import annotations

import functools
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
MODELS = {
    "mha_padding": ROOT / "truth" / "models" / "mha_padding.py",
    "mistral_static_cache": ROOT / "fixtures" / "standin" / "mistral_static_cache.py",
    "rope_kv_decoder": ROOT / "fixtures" / "inference" / "rope_kv_decoder.py",
}
NEEDS_TRANSFORMERS = {"mistral_static_cache"}
FAST = {"mha_padding"}


def _nodes(gm) -> list[tuple[str, str]]:
    return [(n.op, str(n.target)) for n in gm.graph.nodes]


def _load(name: str):
    from graphtool.capture.user.script import load_model

    if name in NEEDS_TRANSFORMERS:
        pytest.importorskip("transformers")
    return load_model(MODELS[name])


@functools.cache
def _inductor_inner_graphs(name: str) -> list[list[tuple[str, str]]]:
    """The graph inductor's inner compiler receives, per region, from a real torch.compile in inference."""
    import torch
    import torch._functorch.config as functorch_config
    from functorch.compile import make_boxed_func
    from torch._inductor.compile_fx import compile_fx

    spec = _load(name)
    got: list[list[tuple[str, str]]] = []

    def recorder(gm, example_inputs, **kw):
        assert kw.get("is_inference"), f"{name}: inductor compiled a training graph in inference"
        got.append(_nodes(gm))
        return make_boxed_func(gm.forward)

    def backend(gm, example_inputs):
        return compile_fx(gm, example_inputs, inner_compile=recorder)

    torch._dynamo.reset()
    try:
        with torch.no_grad(), functorch_config.patch(enable_autograd_cache=False):
            torch.compile(spec.model, backend=backend)(*spec.args, **spec.kwargs)
    finally:
        torch._dynamo.reset()
    return got


@functools.cache
def _graphtool_graphs(name: str) -> list[list[tuple[str, str]]]:
    from graphtool.capture.tracer import trace_model

    cap = trace_model(_load(name), inference=True)
    assert all(r.inference for r in cap.regions), f"{name}: graphtool traced a training graph with inference=True"
    return [_nodes(r.forward) for r in cap.regions]


def _diff(mine: list, theirs: list) -> str:
    import difflib

    lines = difflib.unified_diff([f"{op} {t}" for op, t in theirs], [f"{op} {t}" for op, t in mine],
                                 "inductor's inner compiler", "graphtool", n=1, lineterm="")
    return "\n".join(list(lines)[:40])


@pytest.mark.parametrize("name", [pytest.param(n, marks=[] if n in FAST else [pytest.mark.slow]) for n in MODELS])
def test_inference_graphs_are_what_inductor_lowers(name):
    theirs = _inductor_inner_graphs(name)
    mine = _graphtool_graphs(name)
    assert len(mine) == len(theirs), f"{name}: graphtool has {len(mine)} regions, inductor compiled {len(theirs)}"
    problems = [f"{name} region {i}: graphtool {len(m)} nodes, inductor's inner compiler {len(t)}\n{_diff(m, t)}"
                for i, (m, t) in enumerate(zip(mine, theirs)) if m != t]
    assert not problems, "\n".join(problems)


def test_the_rope_decoder_writes_its_cache_in_two_regions():
    """The fixture is what its name says: two regions, each writing its layer's cache in place."""
    counts = [sum(t in ("aten.copy_.default", "aten.index_put_.default", "aten.index_put.default")
                  for _op, t in g) for g in _graphtool_graphs("rope_kv_decoder")]
    assert len(counts) == 2 and all(counts), counts
