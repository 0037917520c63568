"""The ``--fsdp2`` view at 80 columns, compared exactly with a syrupy snapshot.

The report is built by hand from the figures ``trace tests/fixtures/fsdp2/blocks.py --fsdp2
--world-size 4`` gives (no model traced, torch never imported). Accept an intended change with
``python -m pytest tests/render/test_fsdp2_view.py --snapshot-update``.
"""

from __future__ import annotations

import subprocess
import sys

from graphtool.analysis.distributed.wrappers import (
    PREDICTED_ONLY,
    Fsdp2Report,
    FsdpBreak,
    FsdpUnit,
    UnitCollectives,
    fsdp2_rank_memory,
)
from graphtool.analysis.graph_summary import Source
from graphtool.capture.distributed.fsdp2 import CONVENTION, Fsdp2Run, ShardedParam, Unit
from graphtool.render.distributed import fsdp2_view
from tests.helpers.console import render_text

SITE = "/home/dev/proj/.venv/lib/python3.12/site-packages/"


def _block(i: int) -> Unit:
    p = f"layers.{i}."
    return Unit(f"layers.{i}", (ShardedParam(p + "l1.weight", (250, 64), (63, 64), 4, "float32"),
                                ShardedParam(p + "l1.bias", (250,), (63,), 4, "float32"),
                                ShardedParam(p + "l2.weight", (64, 250), (16, 250), 4, "float32"),
                                ShardedParam(p + "l2.bias", (64,), (16,), 4, "float32")))


ROOT = Unit("", (ShardedParam("head.weight", (8, 64), (2, 64), 4, "float32"),
                 ShardedParam("head.bias", (8,), (2,), 4, "float32")))
RUN = Fsdp2Run(CONVENTION, 4, (ROOT, *(_block(i) for i in range(4))), (), True, "Adam",
               tuple((f"layers.{i}.l1.weight", key, (63, 64), 16128) for i in range(4) for key in ("exp_avg", "exp_avg_sq")))
BLOCK_SHARD = (63 * 64 + 63 + 16 * 250 + 16) * 4
REPORT = Fsdp2Report(
    wrapper=CONVENTION,
    world_size=4,
    units=(FsdpUnit("", 2, 2080, 520, 2080),
           *(FsdpUnit(f"layers.{i}", 4, 128_264, BLOCK_SHARD, 4 * BLOCK_SHARD) for i in range(4))),
    graph_count=2,
    breaks=(FsdpBreak("Attempted to call function marked as skipped", True,
                      Source(SITE + "torch/distributed/fsdp/_fully_shard/_fsdp_common.py", 30),
                      Source("tests/fixtures/fsdp2/blocks.py", 27)),),
    collectives=(),
    eager=(UnitCollectives("", "all_gather", 1, 520, 2080), UnitCollectives("", "reduce_scatter", 1, 2080, 520),
           *(c for i in range(4) for c in (UnitCollectives(f"layers.{i}", "all_gather", 2, BLOCK_SHARD, 4 * BLOCK_SHARD),
                                           UnitCollectives(f"layers.{i}", "reduce_scatter", 1, 4 * BLOCK_SHARD, BLOCK_SHARD)))),
    same_graphs_on_every_rank=True,
    optimizer="Adam",
    memory=fsdp2_rank_memory(RUN),
    predicted_only=PREDICTED_ONLY,
    notes=("every rank compiles the same graphs: they see the unsharded parameters, which FSDP2 all-gathers "
           "to the same shapes on every rank",),
)


def test_fsdp2_view_at_80_columns(snapshot):
    text = render_text(fsdp2_view(REPORT), 80)
    assert all(len(line) <= 80 for line in text.splitlines())
    assert text == snapshot


def _verdict(cudagraphed: bool) -> dict:
    return {"cudagraphed": cudagraphed, "graphs": {"forward": True, "backward": cudagraphed}, "partitions": 2,
            "partitions_cudagraphed": 1 + cudagraphed, "skips": []}


def test_fsdp2_view_with_each_graphs_cuda_graph_verdict_at_80_columns(snapshot):
    """``cudagraphs --fsdp2``: each compiled graph, how many blocks it serves per step, its verdict."""
    from dataclasses import replace

    from graphtool.analysis.cudagraphs.fsdp2 import FSDP2_CG_NOTE, Fsdp2Graph

    report = replace(REPORT, graphs=(Fsdp2Graph(0, 1, _verdict(True)), Fsdp2Graph(1, 3, _verdict(False))),
                     notes=REPORT.notes + (FSDP2_CG_NOTE.format(replays="8 CUDA graphs", graphs="2 compiled graphs"),))
    text = render_text(fsdp2_view(report), 80)
    assert all(len(line) <= 80 for line in text.splitlines())
    assert "  graph 1 (3x per step): CUDA graphs partly: 1 of 2 partitions CUDA-graphed" in text
    assert text == snapshot


def test_the_last_rank_holds_fewer_rows_but_the_same_padded_bytes():
    first, last = REPORT.memory[0], REPORT.memory[-1]
    assert first.params == last.params
    assert last.params_unpadded < first.params_unpadded and last.grads == last.params_unpadded
    assert last.optimizer < first.optimizer  # Adam's moments scale with the rank's rows


def test_the_view_needs_no_torch():
    code = ("import sys; import tests.render.test_fsdp2_view as t; from tests.helpers.console import render_text; "
            "render_text(t.fsdp2_view(t.REPORT), 80); assert 'torch' not in sys.modules, 'torch imported'")
    subprocess.run([sys.executable, "-c", code], check=True)
