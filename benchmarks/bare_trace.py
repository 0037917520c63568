"""The bare torch way of what `graphtool trace` does: torch.compile with an aot_autograd backend
whose compilers keep the graphs, one forward and backward. Imports included in its wall time."""
import runpy
import sys

import torch
from functorch.compile import make_boxed_func
from torch._dynamo.backends.common import aot_autograd

graphs = []


def keep(gm, _):
    graphs.append(gm)
    return make_boxed_func(gm.forward)


model, inputs = runpy.run_path(sys.argv[1])["get_model_and_inputs"]()
out = torch.compile(model, backend=aot_autograd(fw_compiler=keep, bw_compiler=keep))(*inputs)
out.sum().backward()
print(len(graphs), [len(g.graph.nodes) for g in graphs])
