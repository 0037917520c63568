"""The exact facts expected of each example model: mutation verdict and CUDA-graph findings for
both backends, as (code, region, graph, skips, line)."""

from __future__ import annotations

import pytest

from graphtool.analysis.cudagraphs.verdict import cudagraph_verdict
from graphtool.analysis.mutations import analyze_mutations
from tests.helpers import standin_traced, traced

FACTS = {
    # name: (mutation verdict, inductor findings, cudagraphs findings)
    "bool_mask.py": ("no input is mutated and no output aliases an input", [("host-sync", None, None, False, 7)], [("host-sync", None, None, False, 7)]),
    "transpose_input.py": ("1 user input mutated", [("graph-break", None, None, False, 6)], [("graph-break", None, None, False, 6)]),
    # these two run without grad: their one graph is an inference graph, and the verdict names it so (issue 15)
    "same_tensor_twice.py": ("1 user input mutated; inputs a and b share storage", [("mutated-input", 0, "inference", True, 6)], []),
    "mutate_input.py": ("1 user input mutated", [("mutated-input", 0, "inference", True, 6)], []),
    "dynamic_batch.py": ("no input is mutated and no output aliases an input", [], []),
    "graph_breaks.py": (
        "no input is mutated and no output aliases an input",
        [("graph-break", None, None, False, 13), ("graph-break", None, None, False, 16)],
        [("graph-break", None, None, False, 13), ("graph-break", None, None, False, 16)],
    ),
    "hf_gpt2.py": ("no input is mutated and no output aliases an input", [], []),
    "hf_llama.py": ("no input is mutated and no output aliases an input", [], []),
    "transformer.py": ("no input is mutated and no output aliases an input", [], []),
    "mlp.py": ("no input is mutated and no output aliases an input", [], []),
    "convnet_bn.py": ("3 buffers mutated", [], []),
}


def _findings(name, backend):
    v = cudagraph_verdict(standin_traced(name, backend), backend=backend)
    return [(r.code, r.region, r.graph, r.skips, r.source.line if r.source else None) for r in v.reasons]


# the transformers examples take 8-9 s each: the slow tier (docs/ci.md)
@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.slow) if n.startswith("hf_") else n for n in sorted(FACTS)])
def test_example_facts(name):
    verdict, inductor, cudagraphs = FACTS[name]
    assert analyze_mutations(traced(name)).verdict() == verdict
    assert _findings(name, "inductor") == inductor
    assert _findings(name, "cudagraphs") == cudagraphs
    assert standin_traced(name, "inductor").stopped is None
