"""GPU truth for FSDP2's all-gather buffers: what CUDA's caching allocator holds while each block runs.

    python fsdp2_memory.py [WORLD_SIZE]      (needs CUDA; prints one JSON line "ROW {...}")

Rank 0 of torch's fake process group at WORLD_SIZE (default 8), tests/fixtures/fsdp2/blocks.py built on
cuda, ``fully_shard`` on each block and the root (graphtool's ``--fsdp2`` convention), Adam, eager. Step 1
creates the optimizer state; in step 2, ``torch.cuda.memory_allocated()`` is read before the forward
(the baseline: sharded parameters, gradients, optimizer state) and at each block's forward pre-hook,
registered after ``fully_shard``'s own (so it runs once the block is all-gathered), and the peak of the
forward is read with ``max_memory_allocated``. The CPU cannot measure these: graphtool predicts them.
"""
from __future__ import annotations

import json
import runpy
import sys
from pathlib import Path

import torch
import torch.distributed as dist

ROOT = Path(__file__).resolve().parents[3]


def main(world_size: int) -> None:
    from torch.distributed.fsdp import fully_shard
    from torch.testing._internal.distributed.fake_pg import FakeStore

    dist.init_process_group("fake", store=FakeStore(), rank=0, world_size=world_size)
    ns = runpy.run_path(str(ROOT / "tests" / "fixtures" / "fsdp2" / "blocks.py"))
    with torch.device("cuda"):
        model, (x,) = ns["get_model_and_inputs"]()
    for block in model.layers:
        fully_shard(block)
    fully_shard(model)
    opt = ns["get_optimizer"](model)
    held: dict[str, int] = {}
    base = {"value": 0}
    for i, block in enumerate(model.layers):
        block.register_forward_pre_hook(
            lambda mod, args, i=i: held.__setitem__(f"layers.{i}", torch.cuda.memory_allocated() - base["value"]))
    row: dict = {"world_size": world_size, "torch": torch.__version__, "device": torch.cuda.get_device_name(0)}
    for step in (1, 2):
        torch.cuda.synchronize()
        base["value"] = torch.cuda.memory_allocated()
        torch.cuda.reset_peak_memory_stats()
        out = model(x)
        torch.cuda.synchronize()
        peak_forward = torch.cuda.max_memory_allocated() - base["value"]
        out.sum().backward()
        opt.step()
        opt.zero_grad(set_to_none=False)
        if step == 2:
            row.update(baseline_bytes=base["value"], forward_peak_over_baseline=peak_forward,
                       held_at_block_pre_forward=held)
    print("ROW " + json.dumps(row), flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 8)
