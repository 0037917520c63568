"""The H200 rows of DDP and FSDP2 under CUDA graphs (tests/truth/gpu/dist-h200-torch2.11.jsonl: torch 2.11, one
NCCL rank, ``mode="reduce-overhead"``, 5 training steps; see docs/gpu-results.md) agree with what graphtool predicts
on this CPU for the same models (tests/fixtures/ddp/mlp8_relu.py, compiled_ddp_own_forward.py and
tests/fixtures/fsdp2/blocks512.py are dist_truth.py's models):

- the graphs the backend is handed: one per DDPOptimizer split (DDP), one per distinct block graph (FSDP2);
- under DDP, the functions cudagraph trees record (each split graph's forward and backward), every
  ``torch.cuda.graph`` capture over 5 steps (those and the trees' pool) and the graphs replayed in step 5;
- under DDP and FSDP2, the functions cudagraph trees record (each split or block graph's forward and backward),
  every ``torch.cuda.graph`` capture over 5 steps (those and the trees' pool) and the graphs replayed in step 5
  (under FSDP2 a graph serving several blocks replays once per block);
- no CUDA-graph skip.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
ROWS = {r["case"]: r for r in (json.loads(line) for line in
        (ROOT / "tests" / "truth" / "gpu" / "dist-h200-torch2.11.jsonl").read_text().splitlines() if line.strip())}
DDP = ROOT / "tests" / "fixtures" / "ddp"
STEPS = 5


@pytest.mark.slow
@pytest.mark.parametrize("case, script, cap_mb", [
    ("ddp_cap1", "mlp8_relu.py", 1.0),
    ("ddp_cap25", "mlp8_relu.py", 25.0),
])
def test_ddp_cudagraphs_agree_with_the_h200(case, script, cap_mb):
    from graphtool.commands.cudagraphs import cudagraphs

    row = ROWS[case]
    assert row["error"] is None and row["world_size"] == 1
    [result] = cudagraphs(str(DDP / script), steps=STEPS, ddp={"world_size": 2, "bucket_cap_mb": cap_mb})
    steady = result.report.steady
    assert len(result.ddp.graphs) == row["graphs_handed_to_backend"]
    assert steady.functions_graphed == row["functions_graphed"]
    assert steady.captures == row["captures"]
    assert steady.per_step[-1].replays + steady.per_step[-1].recordings == row["replays_in_last_step"]
    assert not [r for r in result.report.reasons if r.skips] and row["cudagraph_skips"] == 0
    assert all(g["cudagraphs"]["cudagraphed"] for g in result.ddp.to_dict()["graphs"])


@pytest.mark.slow
def test_compiled_ddp_graphs_agree_with_the_h200(cli):
    """torch.compile(DDP(model)) over a forward of the user's own: split as DDP(torch.compile(model)) is (the
    CUDA-graph verdict of a script's own DDP is refused on the stand-in: its buckets live on the CPU)."""
    row = ROWS["compiled_ddp"]
    rc, out, _ = cli("trace", DDP / "compiled_ddp_own_forward.py", "--ddp", "--format", "json")
    doc = json.loads(out)
    assert rc == 0 and doc["ddp"]["graph_count"] == len(doc["graphs"]) == row["graphs_handed_to_backend"] == 8


@pytest.mark.slow
@pytest.mark.parametrize("case", ["fsdp2_root_compile"])
def test_fsdp2_graphs_agree_with_the_h200(cli, case):
    row = ROWS[case]
    assert row["error"] is None
    rc, out, _ = cli("trace", ROOT / "tests" / "fixtures" / "fsdp2" / "blocks512.py", "--fsdp2", "--world-size", 1,
                     "--format", "json")
    doc = json.loads(out)
    assert rc == 0 and len(doc["graphs"]) == row["graphs_handed_to_backend"] == row["unique_graphs"]


@pytest.mark.parametrize("case, script", [  # about 3 s each
    ("fsdp2_root_compile", "blocks512.py"),  # fully_shard per block and root, torch.compile(model)
    ("fsdp2_block_compile", "blocks512_per_block.py"),  # block.compile() then fully_shard, the root not compiled
])
def test_fsdp2_cudagraphs_agree_with_the_h200(case, script):
    """``cudagraphs --fsdp2`` on the meta stand-in (rank 0 of a fake group of one, as the H200 ran one NCCL rank)."""
    from graphtool.commands.cudagraphs import cudagraphs

    row = ROWS[case]
    assert row["error"] is None and row["world_size"] == 1
    [result] = cudagraphs(str(ROOT / "tests" / "fixtures" / "fsdp2" / script), steps=STEPS, fsdp2={"world_size": 1})
    steady = result.report.steady
    assert len(result.fsdp2.graphs) == row["graphs_handed_to_backend"] == row["unique_graphs"]
    assert steady.functions_graphed == row["functions_graphed"]
    assert steady.captures == row["captures"]
    assert steady.per_step[-1].replays + steady.per_step[-1].recordings == row["replays_in_last_step"]
    assert not [r for r in result.report.reasons if r.skips] and row["cudagraph_skips"] == 0
    graphs = result.fsdp2.to_dict()["graphs"]
    assert all(g["cudagraphs"]["cudagraphed"] for g in graphs)
    # block 0's graph, then the one the recompile (its input requires grad) gave the other three
    assert [g["runs_per_step"] for g in graphs] == [1, 3]


def test_fsdp2_all_gather_peak_agrees_with_what_the_h200_allocator_held(cli):
    """tests/truth/gpu/fsdp2_memory.py on an H200 (fake group of 8, tests/fixtures/fsdp2/blocks.py): bytes held
    above the step's baseline when the first block starts its forward, i.e. the root's and the first block's
    gathered parameters and the second block's prefetched all-gather buffer. graphtool's all-gather peak is
    that; the allocator rounds each buffer up to its 512-byte blocks."""
    row = json.loads((ROOT / "tests" / "truth" / "gpu" / "fsdp2-memory-h200-torch2.11.json").read_text())
    rc, out, _ = cli("trace", ROOT / "tests" / "fixtures" / "fsdp2" / "blocks.py", "--fsdp2", "--world-size",
                     row["world_size"], "--format", "json")
    fsdp2 = json.loads(out)["fsdp2"]
    gathers = {c["unit"]: c["received_bytes"] for c in fsdp2["eager_collectives"] if c["op"] == "all_gather"}
    held = [gathers[""], gathers["layers.0"], gathers["layers.1"]]  # the root, the running block, the next one
    assert rc == 0 and fsdp2["memory"][0]["allgather_peak"] == sum(held)
    assert sum(-(-b // 512) * 512 for b in held) == row["held_at_block_pre_forward"]["layers.0"]
