"""The CUDA-graph verdict agrees with torch's own checks run on the same graphs."""

from __future__ import annotations

import pytest
import torch

from graphtool.analysis.cudagraphs.verdict import cudagraph_verdict
from graphtool.analysis.devices import device_report
from tests.helpers import standin_traced


def _codes(name, backend):
    v = cudagraph_verdict(standin_traced(name, backend), backend=backend)
    return v, [(r.code, r.region, r.graph, r.skips, r.source.line if r.source else None) for r in v.reasons]


EXPECTED_CUDAGRAPHS = {
    "mlp.py": [],
    "convnet_bn.py": [],
    "transformer.py": [],
    "view_outputs.py": [],
    "cpu_roundtrip.py": [("cpu-node", 0, "forward", True, 13), ("forward-skipped", 0, "backward", True, None)],
    "item_branch.py": [("host-sync", None, None, False, 13)],
}

EXPECTED_INDUCTOR = {
    "mlp.py": [],
    "convnet_bn.py": [],  # BatchNorm buffers are static inputs: mutation allowed
    # inductor's min-cut partitioner recomputes the CPU constant (line 13) in backward rather than saving it;
    # one split per run of CPU ops, at its first op with a user line (partitions, as inductor's scheduler groups them);
    # the 0-d constant itself is inlined into the kernel that reads it, so the forward's split is at .cpu() (line 14)
    "cpu_roundtrip.py": [
        ("partition-split", 0, "forward", False, 14),
        ("partition-split", 0, "backward", False, 15),
    ],
    "mutate_input.py": [("mutated-input", 0, "inference", True, 6)],
    "item_branch.py": [("host-sync", None, None, False, 13)],
}


@pytest.mark.parametrize("name", sorted(EXPECTED_CUDAGRAPHS))
def test_cudagraphs_backend_facts(name):
    v, codes = _codes(name, "cudagraphs")
    assert codes == EXPECTED_CUDAGRAPHS[name]
    # a stand-in that stopped (item_branch: at .item(), before its second region) vouches for nothing past the stop
    assert v.eligible == (not any(c[3] for c in codes) and not v.unjudged)
    assert bool(v.unjudged) == (name == "item_branch.py")


@pytest.mark.parametrize("name", sorted(EXPECTED_INDUCTOR))
def test_inductor_backend_facts(name):
    v, codes = _codes(name, "inductor")
    assert codes == EXPECTED_INDUCTOR[name]


@pytest.mark.parametrize("name", ["mlp.py", "cpu_roundtrip.py", "convnet_bn.py", "mutate_input.py"])
def test_first_skip_equals_torchs_check_for_skip(name, monkeypatch):
    """Run torch's own ``check_for_skip`` (the cudagraphs backend) on the same stand-in graphs, with
    only its device mapping told that meta stands for cuda:0; its message must be our first skip."""
    import torch._dynamo.backends.cudagraphs as cg

    from graphtool.capture import compat

    real = cg.get_device_node_mapping

    def as_cuda(gm):
        mapping = real(gm)
        if torch.device("meta") in mapping:
            mapping[torch.device("cuda", 0)] = mapping.pop(torch.device("meta"))
        return mapping

    monkeypatch.setattr(cg, "get_device_node_mapping", as_cuda)
    cap = standin_traced(name, "cudagraphs")
    v = cudagraph_verdict(cap, backend="cudagraphs")
    for region in cap.regions:
        fixed = compat.num_fw_fixed_arguments(len(region.inputs), region.num_aot_inputs)
        torch_msg = cg.check_for_skip(region.forward, fixed)
        ours = [r for r in v.reasons if r.region == region.index and r.graph == "forward" and r.skips]
        if torch_msg is None:
            assert ours == []
        else:
            assert ours and torch_msg.startswith(ours[0].message)


def test_devices_on_the_standin():
    cap = standin_traced("cpu_roundtrip.py", "inductor")
    rep = device_report(cap, main_device="meta", stand_in="meta stands for cuda:0")
    fw = rep.graphs[0]
    assert fw.counts["cpu"] >= 2
    assert {(c.src_device, c.dst_device, c.source.line) for c in fw.copies} >= {("meta", "cpu", 14)}
    assert {n.source.line for n in fw.off_device} == {13, 14}


def test_devices_clean_model_has_nothing_off_device():
    rep = device_report(standin_traced("mlp.py", "inductor"), main_device="meta")
    assert not rep.found and rep.verdict().startswith("every node runs on meta")


def test_cudagraphs_command_json_and_check(cli):
    import json

    from tests.helpers import example

    rc, out, _ = cli("cudagraphs", example("cpu_roundtrip.py"), "--backend", "cudagraphs", "--format", "json", "--check")
    data = json.loads(out)
    assert rc == 1
    assert data["cudagraphs"]["eligible"] is False and data["cudagraphs"]["predicted"] is True
    first = data["cudagraphs"]["reasons"][0]
    assert first["message"] == "skipping cudagraphs due to cpu device (_tensor_constant0)"
    assert first["source"]["line"] == 13
    rc, _, _ = cli("cudagraphs", example("mlp.py"), "--check")
    assert rc == 0
    rc, _, err = cli("cudagraphs", example("mlp.py"), "--backend", "tensorrt")
    assert rc == 2 and "--backend 'tensorrt'" in err


def test_devices_command_check(cli):
    from tests.helpers import example

    rc, out, _ = cli("devices", example("cpu_roundtrip.py"), "--check")
    assert rc == 1 and "cross-device" in out


def test_dynamic_batch_is_a_warning_not_a_skip(cli):
    import json

    from tests.helpers import example

    for backend in ("inductor", "cudagraphs"):
        rc, out, _ = cli("cudagraphs", example("dynamic_batch.py"), "--dynamic", "--backend", backend, "--format", "json", "--check")
        v = json.loads(out)["cudagraphs"]
        assert rc == 0 and v["eligible"] is True and v["regions"] == 2
        assert [(r["code"], r["region"], r["skips"]) for r in v["reasons"]] == [("dynamic-shape", 1, False)] * 2


def test_a_model_that_mixes_devices_fails_on_the_standin_with_a_clear_message(cli):
    from tests.helpers import FIXTURES

    rc, out, err = cli("cudagraphs", FIXTURES / "cpu_generator.py")
    assert rc == 2 and out == ""
    assert "cpu_generator.py:14: the model raised on the accelerator stand-in" in err
    assert "would fail on a GPU too" in err


@pytest.mark.parametrize("name, blockers", [
    ("mlp.py", []),
    ("item_branch.py", ["host-sync"]),  # .item() is a sync: capture fails
    ("bool_mask.py", ["host-sync"]),  # x[mask] runs nonzero: a sync too
    ("cpu_roundtrip.py", ["cpu-node"]),  # CPU work would not be replayed
    ("graph_breaks.py", []),  # a print() stops dynamo, not a capture of eager code
    ("transpose_input.py", []),
])
def test_what_blocks_graphtools_own_capture(name, blockers):
    """bench captures the eager step, so only reasons that break a capture of eager code stop it."""
    from graphtool.analysis.cudagraphs.verdict import eager_capture_blockers

    verdict = cudagraph_verdict(standin_traced(name, "cudagraphs"), backend="cudagraphs").to_dict()
    assert [r["code"] for r in eager_capture_blockers(verdict)] == blockers
