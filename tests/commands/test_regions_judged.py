"""Every region torch compiles is judged, past host syncs (issue 11, problem 5)."""

from __future__ import annotations

import pytest

from graphtool.capture.standin.host_values import HostValues, ValuesRanOut
from tests.helpers import FIXTURES, example

KV_AFTER_ITEM = str(FIXTURES / "field" / "kv_after_item.py")


def test_the_region_after_a_host_sync_is_judged():
    from graphtool.commands.cudagraphs import cudagraphs

    (result,) = cudagraphs(KV_AFTER_ITEM, inference=True)
    header = result.header
    assert header["regions_compiled"] == header["regions_judged"] == 2 and header["stopped"] is None
    mutated = [r for r in result.report.reasons if r.code == "mutated-input"]
    assert [(r.region, r.skips) for r in mutated] == [(1, True)]
    assert "mutated inputs (2 instances)" in mutated[0].message
    assert not result.report.eligible


def test_every_command_counts_the_same_regions():
    from graphtool.commands.devices import devices
    from graphtool.commands.mutations import mutations
    from graphtool.commands.render import drawing
    from graphtool.commands.trace import trace

    (traced,) = trace(KV_AFTER_ITEM, inference=True)
    assert len(traced.report.regions) == 2
    (muts,) = mutations(KV_AFTER_ITEM, inference=True)
    assert {m.name: m.regions for m in muts.report.mutated} == {"k_cache": (1,), "v_cache": (1,)}
    (dev,) = devices(KV_AFTER_ITEM, inference=True)
    assert dev.header["regions_judged"] == 2
    assert drawing(KV_AFTER_ITEM, graph="forward", region=1).note == "region 1 of 2"


def test_the_item_branch_example_is_judged_whole():
    from graphtool.commands.cudagraphs import cudagraphs

    (result,) = cudagraphs(example("item_branch.py"))
    assert result.header["regions_judged"] == result.header["regions_compiled"] >= 2
    assert result.header["stopped"] is None


def test_host_values_replay_in_order_and_say_when_they_run_out():
    import torch

    values = HostValues()
    with values.recording():
        assert torch.tensor(2).item() == 2 and bool(torch.tensor(True)) and torch.tensor([1, 2]).tolist() == [1, 2]
    with values.replaying():
        meta = torch.empty(1, device="meta")
        assert (meta.item(), bool(meta), meta.tolist()) == (2, True, [1, 2])
        assert torch.tensor(5).item() == 5  # real tensors are answered by torch, not the record
        with pytest.raises(ValuesRanOut):
            meta.item()
    assert torch.Tensor.item.__qualname__ == "TensorBase.item"  # the patch is gone
