"""One rank of a real gloo DDP run: ``python ddp_rank.py SCRIPT RANK WORLD STORE CAP_MB UNUSED OUT.json [STEPS]``.

Runs ``DDP(torch.compile(model), bucket_cap_mb=CAP_MB)`` (or ``torch.compile(DDP(model))`` when the
script's ``get_distributed_model(world_size)`` returns a DDP) one step (forward and backward) in a gloo
group of WORLD processes on this machine (a FileStore at STORE), and writes what torch itself
reports: the graphs its backend was handed (placeholders that are parameters, by name), the
``optimize_ddp_split_child`` artifacts on the structured-trace logger and ``counters["graph_break"]``.
With STEPS (default 1) the step runs that many times as a loop would (every ``.grad`` set to None
first): the graphs the backend got in each step, and each recompile's step and torch's reason (the
``compilation_metrics`` artifact's ``recompile_reason``). A step that raises is reported (its step,
its exception's type and first line), not raised. Everything else is the first step's, read when it
ended: a run of STEPS steps reports what a one-step run reports, and the tests share one run per case.
"""

import json
import logging
import os
import runpy
import sys

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP


class SplitArtifacts(logging.Handler):
    def __init__(self):
        super().__init__(logging.DEBUG)
        self.children, self.split_graphs = [], 0
        self.step, self.recompiles = 1, []

    def emit(self, record):
        meta = getattr(record, "metadata", None) or {}
        if "optimize_ddp_split_child" in meta:
            self.children.append(meta["optimize_ddp_split_child"].get("name"))
        if "optimize_ddp_split_graph" in meta:
            self.split_graphs += 1
        reason = (meta.get("compilation_metrics") or {}).get("recompile_reason")
        if reason:
            self.recompiles.append({"step": self.step, "reason": str(reason)})


def _loss(out):
    """The sum of every tensor in the output (a transformers ModelOutput, a tuple, a tensor)."""
    if isinstance(out, torch.Tensor):
        return out.sum()
    values = out.values() if hasattr(out, "values") else out
    return sum(_loss(v) for v in values if isinstance(v, (torch.Tensor, tuple, list, dict)) or hasattr(v, "values"))


def main(script, rank, world, store_path, cap_mb, unused, out, steps="1"):
    rank, world, cap_mb, unused, steps = int(rank), int(world), float(cap_mb), unused == "1", int(steps)
    dist.init_process_group("gloo", store=dist.FileStore(store_path, world), rank=rank, world_size=world)
    ns = runpy.run_path(script)
    if "get_distributed_model" in ns:
        model, inputs = ns["get_distributed_model"](world)
    else:
        model, inputs = ns["model"], ns["example_inputs"]
    names = {id(p): n for n, p in model.named_parameters()}
    graphs, input_shapes = [], []  # input_shapes: each dynamo graph's inputs that are not parameters (the batch)
    collectives = []  # c10d collectives in the graphs the backend was handed: [op, group name, group size, bytes]

    def backend(gm, example_inputs):
        nodes = [n for n in gm.graph.nodes if n.op == "placeholder"]
        graphs.append(sorted(names[id(t)] for n, t in zip(nodes, example_inputs) if id(t) in names))
        for node in gm.graph.nodes:
            target = str(node.target) if node.op == "call_function" else ""
            if "c10d" in target and "wait_tensor" not in target:
                group = next((a for a in reversed(node.args) if isinstance(a, str)), None)
                val = node.meta.get("example_value")
                size = dist.distributed_c10d._resolve_process_group(group).size() if group is not None else None
                collectives.append([target, group, size, int(val.numel() * val.element_size()) if val is not None else None])
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

    hook_sizes = []  # GRAPHTOOL_RANK_MEMORY=1: each bucket's flat tensor, as the comm hook gets it, per step
    if isinstance(model, DDP):  # the script's own wrapping, compiled as the script would
        wrapped = torch.compile(model, backend=backend)
    else:
        wrapped = DDP(torch.compile(model, backend=backend), bucket_cap_mb=cap_mb, find_unused_parameters=unused)
    memory = os.environ.get("GRAPHTOOL_RANK_MEMORY") == "1" and isinstance(wrapped, DDP)
    if memory:
        from torch.distributed.algorithms.ddp_comm_hooks.default_hooks import allreduce_hook

        def recording(state, bucket):
            hook_sizes[-1].append(bucket.buffer().untyped_storage().nbytes())
            return allreduce_hook(state, bucket)

        wrapped.register_comm_hook(dist.group.WORLD, recording)
    per_step, failed = [], None
    for step in range(1, steps + 1):
        listener.step = step
        for p in model.parameters():
            p.grad = None
        before = len(graphs)
        hook_sizes.append([])
        try:
            _loss(wrapped(*inputs)).backward()
        except Exception as exc:  # a later step's failure is what the prediction must say
            failed = {"step": step, "type": type(exc).__name__, "message": str(exc).strip().splitlines()[0]}
            break
        per_step.append(len(graphs) - before)
        if step == 1:
            first = len(graphs)
            no_grad = sorted(n for n, p in model.named_parameters() if p.requires_grad and p.grad is None)
            # what a one-step run would report, read before later steps (a recompile) add to it
            first_step = {"split_graphs": listener.split_graphs, "graph_breaks": sum(counters["graph_break"].values()),
                          "graph_break_reasons": len(counters["graph_break"]), "collectives": list(collectives)}
    if failed is None or failed["step"] > 1:
        dist.barrier()
    extra = {}
    if memory:
        storages = {p.untyped_storage().data_ptr(): p.untyped_storage().nbytes() for p in model.parameters()}
        logged = wrapped._get_ddp_logging_data()
        extra = {"params_bytes": sum(storages.values()), "bucket_buffers_per_step": hook_sizes,
                 "logged_bucket_sizes": [int(x) for x in str(logged["bucket_sizes"]).split(",") if x.strip()],
                 "logged_total_parameter_size_bytes": int(logged["total_parameter_size_bytes"])}
        if "get_optimizer" in ns:  # the script's optimizer, stepped once on this rank's reduced gradients
            opt = ns["get_optimizer"](model)
            opt.step()
            seen = {}
            for state in opt.state.values():
                for t in state.values():
                    if isinstance(t, torch.Tensor):
                        seen[t.untyped_storage().data_ptr()] = t.untyped_storage().nbytes()
            extra["optimizer_bytes"] = sum(seen.values())
    with open(out, "w") as f:
        json.dump({"first_input_shapes": input_shapes[0] if input_shapes else [], "collectives": collectives,
                   "graphs": first if per_step else len(graphs), "buckets": buckets[:first] if per_step else buckets,
                   "split_children": listener.children[:first] if per_step else listener.children,
                   "split_graphs": listener.split_graphs,
                   "graph_breaks": sum(counters["graph_break"].values()),
                   "graph_break_reasons": len(counters["graph_break"]),
                   **(first_step if per_step else {}),
                   "graphs_per_step": per_step, "recompiles": listener.recompiles, "failed": failed,
                   "no_grad_after_step1": no_grad if per_step else None, **extra}, f)
    dist.destroy_process_group()
    # the facts are written; skip the interpreter's teardown, where torch 2.15's gloo threads once aborted a rank that
    # had finished (std::terminate, "terminate called without an active exception", 2026-11-27, the DDP comm-hook run)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":
    main(*sys.argv[1:])
