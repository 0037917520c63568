"""One rank of a real gloo FSDP2 run: ``python fsdp2_rank.py SCRIPT RANK WORLD STORE OUT.json``.

``fully_shard`` on every module of each ``nn.ModuleList``, then on the root, then
``torch.compile(model)``; one step (forward, backward with ones, the script's optimizer's step) in a
gloo group of WORLD processes (a FileStore at STORE), then a second step under torch's
``CommDebugMode`` (dynamo compiles nothing under a dispatch mode, and FSDP2's collectives run in its
eager hooks either way: the count is the same). Writes what torch itself reports: the graphs the
backend was handed (node counts), dynamo's graph-break reasons on the structured-trace logger, this
rank's local shards, gradients and optimizer state in bytes, every c10d collective with its sizes, and
the bytes the compiled graphs save for backward in a third step compiled with aot_eager (read from the
autograd graph, parameters and inputs left out; a saved-tensors hook would change what dynamo compiles).
"""

import json
import logging
import os
import runpy
import sys

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.distributed.fsdp import fully_shard
from torch.distributed.tensor.debug import CommDebugMode

from graphtool.capture import compat


class BreakReasons(logging.Handler):
    def __init__(self):
        super().__init__(logging.DEBUG)
        self.reasons = set()

    def emit(self, record):
        meta = getattr(record, "metadata", None) or {}
        artifact = meta.get("artifact")
        if isinstance(artifact, dict) and artifact.get("name") == "dynamo_graph_break_reason":
            payload = str(getattr(record, "payload", "") or "")
            reason = next((line.split("Graph Break Reason:", 1)[1].strip() for line in payload.splitlines()
                           if "Graph Break Reason:" in line), payload.splitlines()[0] if payload else "")
            self.reasons.add(reason)


class Sizes(CommDebugMode):
    """CommDebugMode, and each c10d op's tensors' bytes as the dispatcher sees them."""

    def __init__(self):
        super().__init__()
        self.calls = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        name = func._schema.name if hasattr(func, "_schema") else str(func)
        if name.startswith("c10d::"):
            sizes = [a.numel() * a.element_size() for a in args if isinstance(a, torch.Tensor)]
            self.calls.append([name, sizes])
        return super().__torch_dispatch__(func, types, args, kwargs)


def watch_unsharded(model, peak):
    """After each of FSDP2's steps (unshard, wait, reshard...), the bytes of every unsharded
    parameter's storage (FSDP2 frees it, to size 0, when it reshards): the most is ``peak[0]``."""
    from torch.distributed.fsdp import FSDPModule
    from torch.distributed.fsdp._fully_shard._fsdp_param_group import FSDPParamGroup

    groups = [g for m in model.modules() if isinstance(m, FSDPModule)
              for g in [m._get_fsdp_state()._fsdp_param_group] if g is not None]

    def held():
        return sum(fp._unsharded_param.untyped_storage().nbytes() for g in groups for fp in g.fsdp_params
                   if getattr(fp, "_unsharded_param", None) is not None)

    for name in ("unshard", "wait_for_unshard", "reshard", "pre_backward", "post_backward", "post_forward"):
        original = getattr(FSDPParamGroup, name)

        def watched(self, *args, __original=original, **kwargs):
            out = __original(self, *args, **kwargs)
            peak[0] = max(peak[0], held())
            return out

        setattr(FSDPParamGroup, name, watched)


def local_storage(t):
    """The data pointer of ``t``'s (local) storage; None for a storage with none (a freed unsharded parameter)."""
    t = t.to_local() if hasattr(t, "to_local") else t
    try:
        return t.untyped_storage().data_ptr()
    except RuntimeError:
        return None


def compiled_saved(out, model, inputs) -> int:
    """The bytes the compiled graphs saved for backward in this forward: each ``CompiledFunctionBackward``
    node's ``saved_tensors`` (one per call of a compiled graph) reached from ``out``, each storage once,
    parameters and inputs left out (a block's unsharded parameters are freed by then: no bytes)."""
    held = {local_storage(p) for p in model.parameters()} | {local_storage(x) for x in inputs}
    seen, stack, saved = set(), [out.grad_fn], {}
    while stack:
        node = stack.pop()
        if node is None or node in seen:
            continue
        seen.add(node)
        if "CompiledFunction" in type(node).__name__:
            for t in node.saved_tensors:
                key = local_storage(t)
                if key is not None and key not in held:
                    saved[key] = t.untyped_storage().nbytes()
        stack.extend(n for n, _ in node.next_functions)
    return sum(saved.values())


def local(t):
    t = t.to_local() if hasattr(t, "to_local") else t
    return int(t.numel() * t.element_size())


def main(script, rank, world, store_path, out):
    rank, world = int(rank), int(world)
    dist.init_process_group("gloo", store=dist.FileStore(store_path, world), rank=rank, world_size=world)
    graphs = []

    def backend(gm, example_inputs):
        graphs.append(len(gm.graph.nodes))
        return gm.forward

    # a script that compiles its blocks itself (``block.compile()``) compiles them here with the
    # recording backend: the graphs dynamo makes do not depend on the backend
    original_compile = torch.compile

    def compile_here(model=None, **kwargs):
        return original_compile(model, **{**kwargs, "backend": backend})

    torch.compile = compile_here
    ns = runpy.run_path(script)
    if "get_distributed_model" in ns:
        model, inputs = ns["get_distributed_model"](world)
    else:
        model, inputs = ns["get_model_and_inputs"]()
        for m in list(model.modules()):
            if isinstance(m, nn.ModuleList):
                for block in m:
                    fully_shard(block)
        fully_shard(model)
    optimizer = ns["get_optimizer"](model) if "get_optimizer" in ns else None

    listener = BreakReasons()
    trace = logging.getLogger("torch.__trace")
    trace.setLevel(logging.DEBUG)
    trace.propagate = False
    trace.addHandler(listener)
    compiled = original_compile(model, backend=backend)
    peak = [0]
    watch_unsharded(model, peak)
    out_t = compiled(*inputs)
    torch.autograd.backward([out_t], [torch.ones_like(out_t)])
    grads = sum(local(p.grad) for p in model.parameters() if p.grad is not None)
    if optimizer is not None:
        optimizer.step()
    padded = sum(int(torch.Size(s[3]).numel()) * torch.empty((), dtype=s[4]).element_size()
                 for m in model.modules() if hasattr(m, "_get_fsdp_state")
                 for g in [compat.fsdp_param_group(m)] if g is not None for s in compat.fsdp_param_sizes(g))
    state = sum(local(v) for st in (optimizer.state.values() if optimizer else ()) for v in st.values()
                if isinstance(v, torch.Tensor))
    if optimizer is not None:
        optimizer.zero_grad()
    sizes = Sizes()
    with sizes:
        out2 = compiled(*inputs)
        torch.autograd.backward([out2], [torch.ones_like(out2)])
    from torch._dynamo.utils import counters

    unique_graphs, graphs_seen = counters["stats"]["unique_graphs"], list(graphs)  # before the third step's compiles
    # a third step compiled anew with aot_eager (the recording backend hands no graph to AOT autograd):
    # what its compiled graphs save for backward
    torch._dynamo.reset()
    out3 = original_compile(model, backend="aot_eager")(*inputs)
    saved = compiled_saved(out3, model, inputs)
    torch.autograd.backward([out3], [torch.ones_like(out3)])
    dist.barrier()
    with open(out, "w") as f:
        json.dump({"graphs": graphs_seen, "unique_graphs": unique_graphs,
                   "break_reasons": sorted(listener.reasons),
                   "params_unpadded": sum(local(p) for p in model.parameters()), "params_padded": padded,
                   "grads": grads, "unsharded_peak": peak[0], "saved_activations": saved, "optimizer": state if optimizer is not None else None,
                   "comm_counts": {str(k): v for k, v in sizes.get_comm_counts().items()},
                   "calls": sizes.calls}, f)
    dist.destroy_process_group()
    # the facts are written; skip the interpreter's teardown, where torch 2.15's gloo threads once aborted a rank that
    # had finished (std::terminate, "terminate called without an active exception", 2026-11-27, the DDP comm-hook run)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":
    main(*sys.argv[1:])
