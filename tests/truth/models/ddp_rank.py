"""One rank of a real gloo DDP run: ``python ddp_rank.py SCRIPT RANK WORLD STORE CAP_MB UNUSED OUT.json``.

Runs ``DDP(torch.compile(model), bucket_cap_mb=CAP_MB)`` (or ``torch.compile(DDP(model))`` when the
script's ``get_distributed_model(world_size)`` returns a DDP) one step (forward and backward) in a gloo
group of WORLD processes on this machine (a FileStore at STORE), and writes what torch itself
reports: the graphs its backend was handed (placeholders that are parameters, by name), the
``optimize_ddp_split_child`` artifacts on the structured-trace logger and ``counters["graph_break"]``.
"""

import json
import logging
import runpy
import sys

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP


class SplitArtifacts(logging.Handler):
    def __init__(self):
        super().__init__(logging.DEBUG)
        self.children, self.split_graphs = [], 0

    def emit(self, record):
        meta = getattr(record, "metadata", None) or {}
        if "optimize_ddp_split_child" in meta:
            self.children.append(meta["optimize_ddp_split_child"].get("name"))
        if "optimize_ddp_split_graph" in meta:
            self.split_graphs += 1


def main(script, rank, world, store_path, cap_mb, unused, out):
    rank, world, cap_mb, unused = int(rank), int(world), float(cap_mb), unused == "1"
    dist.init_process_group("gloo", store=dist.FileStore(store_path, world), rank=rank, world_size=world)
    ns = runpy.run_path(script)
    if "get_distributed_model" in ns:
        model, inputs = ns["get_distributed_model"](world)
    else:
        model, inputs = ns["model"], ns["example_inputs"]
    names = {id(p): n for n, p in model.named_parameters()}
    graphs, input_shapes = [], []  # input_shapes: each dynamo graph's inputs that are not parameters (the batch)

    def backend(gm, example_inputs):
        nodes = [n for n in gm.graph.nodes if n.op == "placeholder"]
        graphs.append(sorted(names[id(t)] for n, t in zip(nodes, example_inputs) if id(t) in names))
        return gm.forward

    # the split graphs' inputs reach the backend as fake tensors: name them from the dynamo graph
    import torch._dynamo.backends.distributed as ddp_backend

    original = ddp_backend.DDPOptimizer.compile_fn
    buckets = []

    def compile_fn(self, gm, example_inputs, **kw):
        input_shapes.append([list(t.shape) for t in example_inputs if isinstance(t, torch.Tensor) and id(t) not in names])
        try:
            return original(self, gm, example_inputs, **kw)
        finally:
            pnames = {str(n.target): names.get(id(t)) for n, t in
                      zip([n for n in gm.graph.nodes if n.op == "placeholder"], example_inputs)}
            buckets.extend(sorted(pnames.get(p) or p for p in b.params) for b in self.buckets)

    ddp_backend.DDPOptimizer.compile_fn = compile_fn
    listener = SplitArtifacts()
    trace = logging.getLogger("torch.__trace")
    trace.setLevel(logging.DEBUG)
    trace.addHandler(listener)
    from torch._dynamo.utils import counters

    if isinstance(model, DDP):  # the script's own wrapping, compiled as the script would
        wrapped = torch.compile(model, backend=backend)
    else:
        wrapped = DDP(torch.compile(model, backend=backend), bucket_cap_mb=cap_mb, find_unused_parameters=unused)
    wrapped(*inputs).sum().backward()
    dist.barrier()
    with open(out, "w") as f:
        json.dump({"graphs": len(graphs), "buckets": buckets, "first_input_shapes": input_shapes[0] if input_shapes else [],
                   "split_children": listener.children,
                   "split_graphs": listener.split_graphs,
                   "graph_breaks": sum(counters["graph_break"].values()),
                   "graph_break_reasons": len(counters["graph_break"])}, f)
    dist.destroy_process_group()


if __name__ == "__main__":
    main(*sys.argv[1:])
