"""Each decidable reason of the catalogue has a trigger script (tests/fixtures/cudagraphs/) and graphtool's
finding equals what torch's own check functions say on the same stand-in graphs.

torch's functions are called here directly (not through graphtool), under the same inductor config, with
only the meta stand-in renamed to cuda:0 in the device mapping."""

from __future__ import annotations

import functools
import sys

import pytest
import torch

from graphtool.analysis.cudagraphs.catalogue import PREFIX
from graphtool.analysis.cudagraphs.verdict import cudagraph_verdict
from tests.helpers import FIXTURES

FIX = FIXTURES / "cudagraphs"


@functools.cache
def trace(name: str, backend: str = "inductor"):
    from graphtool.capture.standin.meta import to_meta
    from graphtool.capture.tracer import trace_model
    from graphtool.capture.user.script import load_model

    spec = load_model(str(FIX / f"{name}.py"))
    cfg = getattr(sys.modules[spec.module_name], "DYNAMO_CONFIG", {})
    with torch._dynamo.config.patch(cfg):
        return trace_model(to_meta(spec), backend=backend, standin=True)


# torch's own device mapping, taken before any test swaps it for the cuda-renaming one
_REAL_MAPPING = functools.partial(__import__("torch._dynamo.backends.cudagraphs", fromlist=["x"]).get_device_node_mapping)
NO_PARTITION = {"graph_partition": False}
CASES = [  # fixture, backend, --set, the catalogue codes of skips and splits, in order
    ("cpu_node", "inductor", NO_PARTITION, ["CG002"]),
    # one split, at the .cpu() round trip: torch.tensor(2.0) (a 0-d CPU constant) is inlined where it is read, and
    # inductor lowers this inference graph after its joint-graph passes (no float32->float32 convert between them)
    ("cpu_node", "inductor", {}, ["CG020"]),
    ("cpu_node", "cudagraphs", {}, ["CG002"]),
    ("cpu_node", "inductor", {"cudagraph_min_partition_size": 100}, ["CG028", "CG020", "CG028"]),
    ("cpu_node", "inductor", {"cpp_wrapper": True}, ["CG017", "CG020"]),
    ("item_op", "inductor", NO_PARTITION, ["CG004"]),
    ("item_op", "inductor", {}, ["CG023"]),
    ("item_op", "cudagraphs", {}, ["CG004"]),
    ("nonzero_op", "inductor", NO_PARTITION, ["CG010"]),
    ("nonzero_op", "inductor", {}, ["CG023"]),
    ("bool_index_put", "inductor", NO_PARTITION, ["CG008"]),
    ("bool_index_put", "inductor", {}, ["CG024"]),
    ("unsafe_custom_op", "inductor", NO_PARTITION, ["CG007"]),
    ("unsafe_custom_op", "inductor", {}, ["CG024"]),
    ("mutated_input", "inductor", {}, ["CG011"]),
    ("mutated_input", "inductor", {"cudagraph_support_input_mutation": False, **NO_PARTITION}, ["CG011"]),
    ("cond_op", "inductor", {}, ["CG015"]),
    ("override_off", "inductor", {}, ["CG018"]),
    ("cpu_only", "inductor", {}, ["CG019"]),
]


def _codes(v):
    return [r.cg for r in v.reasons if r.kind in ("skip", "split")]


@pytest.mark.parametrize("name, backend, settings, codes", CASES, ids=lambda x: str(x) if not isinstance(x, dict) else
                         ",".join(f"{k}={v}" for k, v in x.items()) or "defaults")
def test_trigger_gives_its_code(name, backend, settings, codes):
    from graphtool.analysis.cudagraphs.catalogue import ENTRIES

    installed = tuple(int(x) for x in torch.__version__.split("+")[0].split(".")[:2])
    expected = [c for c in codes if ENTRIES[c].on(installed)]  # a reason this torch does not have is not given
    if settings.get("cpp_wrapper") and not ENTRIES["CG017"].on(installed):
        expected = ["CG002"]  # torch 2.11 drops partitioning under cpp_wrapper: as with graph_partition=false
    if not all(ENTRIES[c].on(installed) for c in codes) and name == "override_off":
        pytest.skip(f"torch {torch.__version__} has no torch._dynamo.override_cudagraphs (2.12+)")
    assert _codes(cudagraph_verdict(trace(name, backend), backend=backend, settings=settings)) == expected


def _as_cuda(gm) -> dict:
    mapping = dict(_REAL_MAPPING(gm))
    if torch.device("meta") in mapping:
        mapping[torch.device("cuda", 0)] = mapping.pop(torch.device("meta"))
    return mapping


def torch_whole_graph_skip(gm, partition: bool) -> str | None:
    """What torch's compile-time checks say about one graph (compile_fx's order): incompatible op
    (without partitioning), then devices; the message as torch builds it, without the outer prefix."""
    from torch._inductor import config
    from torch._inductor.cudagraph_utils import check_multiple_devices_or_any_cpu_nodes
    from torch._inductor.utils import _fx_node_is_input_dependent_cudagraph_unsafe, get_first_incompatible_cudagraph_node

    with config.patch({"graph_partition": partition, "triton.cudagraphs": True}):
        if not partition and (node := get_first_incompatible_cudagraph_node(gm)) is not None:
            if _fx_node_is_input_dependent_cudagraph_unsafe(node):  # lowering.index_put_fallback says it first
                return "index_put_ fallback with boolean indexing is not compatible with CUDA graphs"
            return f"incompatible op {node.target}"
        return check_multiple_devices_or_any_cpu_nodes(_as_cuda(gm))


@pytest.mark.parametrize("name", ["cpu_node", "item_op", "nonzero_op", "unsafe_custom_op", "bool_index_put"])
@pytest.mark.parametrize("partition", [False, True])
def test_whole_graph_skips_agree_with_torch(name, partition):
    cap = trace(name)
    v = cudagraph_verdict(cap, settings={"graph_partition": partition})
    for region in cap.regions:
        for graph, gm in (("inference" if region.inference else "forward", region.forward), ("backward", region.backward)):
            if gm is None:
                continue
            torch_says = torch_whole_graph_skip(gm, partition)
            ours = [r for r in v.reasons if r.region == region.index and r.graph == graph and r.skips]
            if torch_says is None:
                assert ours == []
            else:
                assert ours, torch_says
                # ours is torch's verbatim message (its own prefix added once more) and the clean one
                assert ours[0].torch_message.startswith(PREFIX)
                assert ours[0].message.removeprefix(PREFIX) in torch_says or torch_says.startswith(ours[0].message), (ours[0], torch_says)


@pytest.mark.parametrize("name", ["bool_index_put", "unsafe_custom_op", "nonzero_op", "item_op", "cpu_node"])
def test_splits_are_the_nodes_torch_calls_unsafe(name):
    """With partitioning, every node torch's ``is_cudagraph_unsafe_fx_node`` flags lies outside the
    CUDA-graphed partitions, and each CG024 split starts at such a node."""
    from torch._inductor.utils import is_cudagraph_unsafe_fx_node

    cap = trace(name)
    v = cudagraph_verdict(cap, settings={})
    unsafe = {(str(n.target).removeprefix("aten.")) for r in cap.regions for n in r.forward.graph.nodes if is_cudagraph_unsafe_fx_node(n)}
    cg024 = {r.message.rsplit(" at ", 1)[1] for r in v.reasons if r.cg == "CG024"}
    assert cg024 == unsafe
    outside = {p.op for p in v.partitions if not p.cudagraphed}
    assert unsafe <= outside


def test_cudagraphs_backend_agrees_with_check_for_skip(monkeypatch):
    import torch._dynamo.backends.cudagraphs as cg
    from torch._dynamo.backends.cudagraphs import check_for_skip
    from torch._inductor.utils import num_fw_fixed_arguments

    for name in ("cpu_node", "item_op"):
        cap = trace(name, "cudagraphs")
        v = cudagraph_verdict(cap, backend="cudagraphs")
        region = cap.regions[0]
        fixed = num_fw_fixed_arguments(len(region.inputs), region.num_aot_inputs)
        with monkeypatch.context() as m:
            m.setattr(cg, "get_device_node_mapping", _as_cuda)
            torch_msg = check_for_skip(region.forward, fixed)
        first = next(r for r in v.reasons if r.skips)
        # torch logs f"skipping cudagraphs due to {check_for_skip(...)}": the doubled prefix, verbatim
        assert first.torch_message == PREFIX + torch_msg
        assert first.message == torch_msg.split(". Found from")[0]


def test_mutation_agrees_with_inductors_checks():
    from torch._dynamo.backends.cudagraphs import find_input_mutations
    from torch._inductor import config
    from torch._inductor.cudagraph_utils import check_for_mutation_ignore_cuda_graph_managed_tensor, get_mutation_stack_trace, get_placeholder_info
    from torch.utils._ordered_set import OrderedSet

    cap = trace("mutated_input")
    gm = cap.regions[0].forward
    idxs = find_input_mutations(gm.graph)
    static = [r.position for r in cap.regions[0].forward_inputs if r.static]
    with config.patch({"triton.cudagraph_trees": True}):
        compile_time = check_for_mutation_ignore_cuda_graph_managed_tensor(gm, OrderedSet(str(i) for i in idxs), OrderedSet(idxs), static)
    run_time = get_mutation_stack_trace(get_placeholder_info(gm.graph), sorted(set(idxs) - set(static)))
    (on,) = [r for r in cudagraph_verdict(cap).reasons if r.cg == "CG011"]
    (off,) = [r for r in cudagraph_verdict(cap, settings={"cudagraph_support_input_mutation": False}).reasons if r.cg == "CG011"]
    assert on.torch_message == run_time  # cudagraph trees log it as is, once
    assert off.torch_message == PREFIX + compile_time  # CompiledFxGraph prefixes it again
    assert off.message == "skipping cudagraphs due to mutated inputs (1 instances)"
    assert on.message == off.message + " (checked at run time)"


def test_storage_mutation_agrees_with_torch():
    """set_() on an input breaks the dynamo graph, so the trigger is an AOT graph made with make_fx."""
    pytest.importorskip("torch._inductor.cudagraph_utils").__dict__.get("get_input_storage_mutation_info") or pytest.skip(
        f"torch {torch.__version__} has no input storage mutation check (2.13+)")
    from torch._inductor.cudagraph_utils import get_input_storage_mutation_info, get_input_storage_mutation_reason
    from torch.fx.experimental.proxy_tensor import make_fx

    from graphtool.capture import compat

    def f(buf, x):
        buf.set_(x.sin())
        return buf.cos()

    gm = make_fx(f)(torch.zeros(4), torch.randn(4))
    ours = compat.input_storage_mutation_reason(gm)
    assert ours == get_input_storage_mutation_reason(get_input_storage_mutation_info(gm))
    assert ours.startswith("input storage mutation (1 instances)")


def test_unknown_or_bad_setting_exits_2(cli):
    from tests.helpers import example

    rc, out, err = cli("cudagraphs", example("mlp.py"), "--set", "graph_partitions=false")
    assert rc == 2 and out == "" and "unknown setting 'graph_partitions'" in err and "graph_partition" in err
    rc, _, err = cli("cudagraphs", example("mlp.py"), "--set", "cudagraph_min_partition_size=lots")
    assert rc == 2 and "whole number" in err


def test_set_overrides_the_installed_config(cli):
    import json

    rc, out, _ = cli("cudagraphs", str(FIX / "cpu_node.py"), "--set", "graph_partition=false", "--format", "json")
    data = json.loads(out)["cudagraphs"]
    assert rc == 0 and data["config"]["graph_partition"] is False
    first = data["reasons"][0]
    assert first["cg"] == "CG002" and first["torch_message"].startswith(PREFIX + PREFIX + "cpu device")
    assert data["coverage_line"].startswith("reduce-overhead would CUDA-graph 0 of 1 graphs, 0% of ops; skipped at ")
