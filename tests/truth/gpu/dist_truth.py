"""GPU ground truth for CUDA graphs under DDP, FSDP2 and collectives in a compiled graph (issue 26).

  python dist_truth.py one CASE          one case, this process (NCCL group of one rank on cuda:0)
  python dist_truth.py all OUT.jsonl     every case, each in a fresh process, one JSON row per case

One GPU holds one NCCL rank, so every case runs at world size 1: DDP's buckets, DDPOptimizer's
splits, FSDP2's hooks and the collectives still run as at any world size (the split follows the
bucket cap, not the world size). Each case: ``mode="reduce-overhead"`` through a counting backend
(inductor's ``compile_fx`` with ``triton.cudagraphs`` on, so DDPOptimizer's split graphs are
counted as the backend receives them), 5 training steps (grads to None,
``cudagraph_mark_step_begin``, forward, ``.sum().backward()``), ``TORCH_LOGS=cudagraphs,perf_hints``.
Counted: graphs handed to the backend, ``unique_graphs``, graph breaks, ``cudagraph_skips`` and the
logged skip messages, ``torch.cuda.graph`` captures, replays in the last step and the distinct
functions cudagraph trees recorded. Runs on CPU too (``--cpu``: gloo, aot_eager, nothing recorded),
so the script's logic is tested where no GPU is lent.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

CASES = [
    "plain",
    "ddp_cap1",
    "ddp_cap25",
    "compiled_ddp",
    "ddp_unused_find",
    "fsdp2_root_compile",
    "fsdp2_block_compile",
    "funcol_in_graph",
    "funcol_in_graph_partition",
    "c10d_in_graph",
]


def build(case, device):
    import torch
    import torch.distributed as dist
    from torch import nn

    torch.manual_seed(0)

    class Mlp8(nn.Module):
        def __init__(self, unused=False):
            super().__init__()
            self.layers = nn.ModuleList(nn.Linear(512, 512) for _ in range(8))
            if unused:
                self.unused = nn.Linear(512, 512)

        def forward(self, x):
            for layer in self.layers:
                x = torch.relu(layer(x))
            return x

    class Block(nn.Module):  # a user-defined block: its forward is a frame dynamo compiles on its own
        def __init__(self):
            super().__init__()
            self.up, self.down = nn.Linear(512, 1024), nn.Linear(1024, 512)

        def forward(self, x):
            return x + self.down(torch.relu(self.up(x)))

    class Blocks(nn.Module):
        def __init__(self):
            super().__init__()
            self.layers = nn.ModuleList(Block() for _ in range(4))

        def forward(self, x):
            for layer in self.layers:
                x = layer(x)
            return x

    class Collective(nn.Module):
        def __init__(self, how):
            super().__init__()
            self.a, self.b, self.how = nn.Linear(512, 512), nn.Linear(512, 512), how

        def forward(self, x):
            x = self.a(x)
            if self.how == "funcol":
                import torch.distributed._functional_collectives as funcol

                x = funcol.all_reduce(x, "sum", dist.group.WORLD)
            else:
                x = x.clone()
                dist.all_reduce(x)
            return self.b(torch.relu(x))

    x = torch.randn(16, 512, device=device)
    if case.startswith("funcol") or case == "c10d_in_graph":
        return Collective("funcol" if case.startswith("funcol") else "c10d").to(device), x
    if case.startswith("fsdp2"):
        return Blocks().to(device), x
    return Mlp8(unused=case == "ddp_unused_find").to(device), x


def one(case, cpu=False):
    import torch
    import torch.distributed as dist
    from torch._dynamo.utils import counters

    device = "cpu" if cpu else "cuda"
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", str(29500 + os.getpid() % 1000))
    dist.init_process_group("gloo" if cpu else "nccl", rank=0, world_size=1, **({} if cpu else {"device_id": torch.device("cuda", 0)}))
    captures, replays, functions, handed = [], [], set(), []
    if not cpu:
        orig_enter, orig_replay = torch.cuda.graph.__enter__, torch.cuda.CUDAGraph.replay

        def counting_enter(self, *a, **k):
            captures.append(1)
            return orig_enter(self, *a, **k)

        def counting_replay(self, *a, **k):
            replays.append(1)
            return orig_replay(self, *a, **k)

        torch.cuda.graph.__enter__ = counting_enter
        torch.cuda.CUDAGraph.replay = counting_replay
        from torch._inductor import cudagraph_trees as trees

        orig_init = trees.CUDAGraphNode.__init__

        def node_init(self, *a, **k):
            orig_init(self, *a, **k)
            functions.add(self.wrapped_function.id)

        trees.CUDAGraphNode.__init__ = node_init
        import torch._inductor.config as iconfig

        iconfig.triton.cudagraphs = True
        if case.endswith("_partition"):
            iconfig.graph_partition = True
        from torch._inductor.compile_fx import compile_fx

        def backend(gm, example_inputs):
            handed.append(sum(1 for n in gm.graph.nodes if n.op == "call_function"))
            return compile_fx(gm, example_inputs)
    else:

        def backend(gm, example_inputs):
            handed.append(sum(1 for n in gm.graph.nodes if n.op == "call_function"))
            from functorch.compile import make_boxed_func
            from torch._dynamo.backends.common import aot_autograd

            def boxed(g, _inputs):
                return make_boxed_func(g.forward)

            return aot_autograd(fw_compiler=boxed, bw_compiler=boxed)(gm, example_inputs)

    from torch.nn.parallel import DistributedDataParallel as DDP

    model, x = build(case, device)
    counters.clear()
    if case == "plain" or case.startswith("funcol") or case == "c10d_in_graph":
        run = torch.compile(model, backend=backend)
    elif case == "ddp_cap1":
        run = DDP(torch.compile(model, backend=backend), bucket_cap_mb=1)
    elif case == "ddp_cap25":
        run = DDP(torch.compile(model, backend=backend), bucket_cap_mb=25)
    elif case == "compiled_ddp":
        run = torch.compile(DDP(model, bucket_cap_mb=1), backend=backend)
    elif case == "ddp_unused_find":
        run = DDP(torch.compile(model, backend=backend), bucket_cap_mb=1, find_unused_parameters=True)
    elif case.startswith("fsdp2"):
        from torch.distributed.fsdp import fully_shard

        for layer in model.layers:
            if case == "fsdp2_block_compile":
                layer.compile(backend=backend)
            fully_shard(layer)
        fully_shard(model)
        run = model if case == "fsdp2_block_compile" else torch.compile(model, backend=backend)
    else:
        raise SystemExit(f"unknown case {case}")
    params = list(model.parameters())
    row = {"case": case, "error": None}
    try:
        for step in range(5):
            before = len(replays)
            for p in params:
                p.grad = None
            if not cpu:
                torch.compiler.cudagraph_mark_step_begin()
            out = run(x)
            out.sum().backward()
            out = None
            if not cpu:
                torch.cuda.synchronize()
            row["replays_in_last_step"] = len(replays) - before
            row[f"handed_after_step_{step + 1}"] = len(handed)
    except Exception as e:
        row["error"] = f"{type(e).__name__}: {(str(e).splitlines() or [''])[0]}"[:300]
    row.update(
        {
            "graphs_handed_to_backend": len(handed),
            "call_functions_per_graph": handed,
            "unique_graphs": counters["stats"].get("unique_graphs", 0),
            "graph_breaks": sum(counters["graph_break"].values()),
            "graph_break_reasons": sorted(counters["graph_break"])[:5],
            "cudagraph_skips": int(counters["inductor"].get("cudagraph_skips", 0)),
            "captures": len(captures),
            "replays": len(replays),
            "functions_graphed": len(functions),
        }
    )
    print("ROW " + json.dumps(row), flush=True)
    dist.destroy_process_group()


def all_cases(out_path, cpu=False, jobs=1):
    import torch

    env = dict(os.environ, TORCH_LOGS="cudagraphs,perf_hints", PYTHONUNBUFFERED="1")
    meta = {"torch": torch.__version__, "device": "cpu" if cpu else torch.cuda.get_device_name(0), "date": time.strftime("%Y-%m-%d"), "world_size": 1}

    def run_case(case):
        t0 = time.time()
        try:
            p = subprocess.run([sys.executable, __file__, "one", case] + (["--cpu"] if cpu else []), capture_output=True, text=True, timeout=300, env=env)
            rows = [ln[4:] for ln in p.stdout.splitlines() if ln.startswith("ROW ")]
            row = (
                json.loads(rows[-1]) if rows else {"case": case, "error": f"no row: rc={p.returncode} " + ((p.stderr.strip().splitlines() or ["?"])[-1])[:300]}
            )
            row["skip_messages"] = sorted(
                {ln.split("skipping cudagraphs due to")[-1].strip()[:200] for ln in p.stderr.splitlines() if "skipping cudagraphs" in ln}
            )
        except subprocess.TimeoutExpired:
            row = {"case": case, "error": "timed out after 300 s"}
        row.update(meta, wall_s=round(time.time() - t0, 1))
        return row

    import concurrent.futures as cf

    with open(out_path, "a") as f, cf.ThreadPoolExecutor(jobs) as pool:
        for row in pool.map(run_case, CASES):
            f.write(json.dumps(row) + "\n")
            f.flush()
            print(
                f"{row['case']:28} handed={row.get('graphs_handed_to_backend')} uniq={row.get('unique_graphs')} "
                f"breaks={row.get('graph_breaks')} skips={row.get('cudagraph_skips')} captures={row.get('captures')} "
                f"fns={row.get('functions_graphed')} replays/step={row.get('replays_in_last_step')} "
                f"err={(row.get('error') or '')[:70]} {'; '.join(row.get('skip_messages', []))[:100]}",
                flush=True,
            )


if __name__ == "__main__":
    cpu = "--cpu" in sys.argv
    args = [a for a in sys.argv[1:] if a != "--cpu"]
    if args[0] == "one":
        one(args[1], cpu)
    else:
        all_cases(args[1], cpu, jobs=int(os.environ.get("JOBS", "1")))
