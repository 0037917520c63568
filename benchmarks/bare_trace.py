"""The bare torch way of what `graphtool trace --backend inductor` does: torch.compile with inductor's
own AOT stage (compile_fx) whose inner compiler keeps each graph instead of generating code; one
forward and backward. Imports included in its wall time.

    python benchmarks/bare_trace.py MODEL.py
"""
import runpy
import sys

import torch
import torch._functorch.config as functorch_config
from functorch.compile import make_boxed_func
from torch._inductor.compile_fx import compile_fx

graphs = []


def keep(gm, example_inputs, **_):
    graphs.append(gm)
    return make_boxed_func(gm.forward)


def backend(gm, example_inputs):
    return compile_fx(gm, example_inputs, inner_compile=keep)


model, inputs = runpy.run_path(sys.argv[1])["get_model_and_inputs"]()
with functorch_config.patch(enable_autograd_cache=False):
    out = torch.compile(model, backend=backend)(*inputs)
    out.sum().backward()
print(len(graphs), [len(g.graph.nodes) for g in graphs])
