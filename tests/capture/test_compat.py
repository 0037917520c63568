"""Every torch-private symbol graphtool uses exists in the installed torch and behaves as expected.

When a torch release removes or renames one, the matching test fails here, loudly."""

from __future__ import annotations

import pytest
import torch

from graphtool.capture import compat
from graphtool.errors import UnsupportedTorch


@pytest.mark.parametrize("version, ok", [("2.13.0+cpu", True), ("2.11.0", True), ("2.12.1", True), ("2.10.0", False), ("2.2.0", False), ("3.0.0", False)])
def test_version_range_compares_numbers(version, ok):
    if ok:
        compat.check_torch_version(version, allow_untested=False)
    else:
        with pytest.raises(UnsupportedTorch, match="not supported"):
            compat.check_torch_version(version, allow_untested=False)


def test_version_parse_is_numeric():
    assert compat.parse_torch_version("2.10.0") > compat.parse_torch_version("2.2.0")


def test_untested_torch_can_be_allowed():
    compat.check_torch_version("2.99.0", allow_untested=True)


def test_installed_torch_is_supported():
    compat.check_torch_version(torch.__version__, allow_untested=False)


PRIVATE = [
    ("torch._dynamo", "reset"),
    ("torch._dynamo.backends.common", "aot_autograd"),
    ("torch._guards", "TracingContext"),
    ("torch._functorch.aot_autograd", "make_boxed_func"),
    ("torch._inductor.cudagraph_utils", "format_default_skip_message"),
    ("torch._inductor.cudagraph_utils", "check_multiple_devices_or_any_cpu_nodes"),
    ("torch._inductor.cudagraph_utils", "get_placeholder_info"),
    ("torch._inductor.cudagraph_utils", "get_mutation_stack_trace"),
    ("torch._inductor.cudagraph_utils", "get_input_storage_mutation_reason"),
    ("torch._dynamo.backends.cudagraphs", "get_device_node_mapping"),
    ("torch._dynamo.backends.cudagraphs", "find_input_mutations"),
    ("torch._inductor.utils", "get_first_incompatible_cudagraph_node"),
    ("torch._inductor.utils", "num_fw_fixed_arguments"),
    ("torch._inductor.utils", "count_tangents"),
    ("torch._inductor.utils", "is_using_cudagraph_partition"),
    ("torch._inductor", "config"),
    ("torch._dynamo", "config"),
    ("torch.multiprocessing.reductions", "StorageWeakRef"),
    ("torch.utils._python_dispatch", "TorchDispatchMode"),
]


@pytest.mark.parametrize("module, attr", PRIVATE)
def test_private_symbol_exists(module, attr):
    assert compat._require(module, attr) is not None


def test_missing_symbol_names_version_and_symbol():
    with pytest.raises(UnsupportedTorch, match=r"torch .* has no torch._dynamo.no_such_thing"):
        compat._require("torch._dynamo", "no_such_thing")


@pytest.mark.parametrize("flag", ["graph_partition", "triton.cudagraph_support_input_mutation", "triton.cudagraph_trees", "triton.cudagraphs"])
def test_inductor_flags_exist(flag):
    assert isinstance(compat.inductor_flag(flag), bool)


@pytest.mark.parametrize("flag", ["cudagraph_backend_support_input_mutation", "cudagraph_backend_keep_input_mutation"])
def test_dynamo_flags_exist(flag):
    assert isinstance(compat.dynamo_flag(flag), bool)


def test_skip_message_wording():
    assert compat.cudagraph_skip_message("mutated inputs") == "skipping cudagraphs due to mutated inputs"


def test_aot_descriptors_on_a_real_trace():
    """Placeholders and outputs carry AOT descriptors that compat decodes."""
    from tests.helpers import traced

    region = traced("convnet_bn.py").regions[0]
    fw_roles = [compat.describe_aot_input(compat.node_descriptor(n))[0] for n in region.forward.graph.find_nodes(op="placeholder")]
    assert set(fw_roles) == {"plain"}
    out_roles = [compat.describe_aot_output(d)[0] for d in compat.output_descriptors(region.forward.graph)]
    assert out_roles[:3] == ["mutated_input"] * 3 and "user_output" in out_roles and "saved_for_backward" in out_roles
    bw_roles = [compat.describe_aot_input(compat.node_descriptor(n))[0] for n in region.backward.graph.find_nodes(op="placeholder")]
    assert "tangent" in bw_roles
    grads = [compat.describe_aot_output(d)[0] for d in compat.output_descriptors(region.backward.graph)]
    assert "gradient" in grads


def test_fw_metadata_is_captured():
    from tests.helpers import traced

    meta = traced("convnet_bn.py").regions[0].fw_metadata
    assert hasattr(meta, "input_info") and hasattr(meta, "output_info")
    assert {"mutates_data", "mutates_metadata", "mutates_storage_metadata"} <= set(dir(meta.input_info[0]))


def test_storage_key_and_views():
    a = torch.randn(4)
    assert compat.storage_key(a) == compat.storage_key(a[:2])
    assert compat.storage_key(a) != compat.storage_key(torch.randn(4))
    assert compat.is_view(a[:2]) and not compat.is_view(a)


def test_structured_trace_logger_name():
    import torch._logging._internal as internal

    assert internal.trace_log.name == compat.STRUCTURED_TRACE_LOGGER


def test_saved_values_reads_what_autograd_saved():
    x = torch.randn(3, 4, requires_grad=True)
    w = torch.randn(4, 2, requires_grad=True)
    saved = dict(compat.saved_values((x @ w).grad_fn))
    assert tuple(saved["self"].shape) == (3, 4) and tuple(saved["mat2"].shape) == (4, 2)


def test_aot_records_decode_mutations_and_static_inputs():
    from tests.helpers import traced

    region = traced("convnet_bn.py").regions[0]
    mutated = {r.ref.name: r.mutation_kinds for r in region.forward_inputs if r.mutated}
    assert mutated == {n: ("data",) for n in ("bn.running_mean", "bn.running_var", "bn.num_batches_tracked")}
    assert all(r.static for r in region.forward_inputs if r.ref and r.ref.kind == "parameter")
    assert [o.alias_type for o in region.forward_outputs] == ["non_alias"]
