"""Each torch-private symbol of the CUDA-graph catalogue block (graphtool/capture/compat/cudagraphs.py) and the
config flags it reads (compat/dynamo.py) exists on this torch and behaves."""

from __future__ import annotations

import pytest
import torch
from torch.fx.experimental.proxy_tensor import make_fx

from graphtool.capture import compat


def _graph(fn, *args):
    return make_fx(fn)(*args)


def test_is_cudagraph_unsafe_node_and_bool_index_put():
    def masked(x):
        y = x.clone()
        y[x > 0] = torch.zeros(())  # a Python scalar becomes masked_fill_ on torch 2.15
        return y

    gm = _graph(masked, torch.randn(4))
    flags = {str(n.target): (compat.is_cudagraph_unsafe_node(n), compat.bool_index_put_node(n)) for n in gm.graph.nodes if n.op == "call_function"}
    assert flags["aten.index_put_.default"] == (True, True)
    assert flags["aten.clone.default"] == (False, False)






def test_inductor_mutation_check():
    def f(a, b):
        a.add_(1)
        return b * 2

    gm = _graph(f, torch.zeros(2), torch.ones(2))
    idxs = compat.graph_input_mutations(gm.graph)
    assert idxs == {0}
    with compat.inductor_config_patch({"triton.cudagraph_trees": True}):
        assert compat.inductor_mutation_check(gm, idxs, []).startswith("skipping cudagraphs due to mutated inputs (1 instances)")
        assert compat.inductor_mutation_check(gm, idxs, [0]) is None  # static inputs may be mutated




def test_has_inductor_flag_and_dynamo_config_patch():
    assert compat.has_inductor_flag("graph_partition") and compat.has_inductor_flag("triton.cudagraph_trees")
    assert not compat.has_inductor_flag("triton.no_such_flag")
    before = compat.dynamo_flag("cudagraph_backend_support_input_mutation")
    with compat.dynamo_config_patch({"cudagraph_backend_support_input_mutation": not before}):
        assert compat.dynamo_flag("cudagraph_backend_support_input_mutation") is (not before)
    assert compat.dynamo_flag("cudagraph_backend_support_input_mutation") is before


@pytest.mark.skipif(not hasattr(torch._dynamo, "override_cudagraphs"), reason="torch._dynamo.override_cudagraphs is 2.12+")
def test_cudagraph_annotation():
    """dynamo records ``override_cudagraphs`` on its graph's meta (2.12+)."""
    seen = []

    def backend(gm, example_inputs):
        seen.append(compat.cudagraph_annotation(gm))
        return gm.forward

    def f(x):
        with torch._dynamo.override_cudagraphs(fwd=False):
            return x.sin()

    torch._dynamo.reset()
    torch.compile(f, backend=backend)(torch.randn(2))
    torch._dynamo.reset()
    assert seen == [(False, None)]
    assert compat.cudagraph_annotation(torch.fx.GraphModule(torch.nn.Module(), torch.fx.Graph())) is None
