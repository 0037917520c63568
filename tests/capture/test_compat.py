"""Every torch-private symbol graphtool uses exists in the installed torch and behaves as expected.

When a torch release removes or renames one, the matching test fails here, loudly."""

from __future__ import annotations

import importlib
import io
import json
import os
import re

import pytest
import torch

from graphtool import SUPPORTED_TORCH
from graphtool.capture import compat
from graphtool.capture.compat import _lookup, versions
from graphtool.capture.compat.dynamo import _user_codes
from graphtool.capture.compat.meta import _meta_kernels_over_composites
from graphtool.errors import UnsupportedTorch
from tests.helpers import example

SILENCE = "GRAPHTOOL_ALLOW_UNTESTED_TORCH"


@pytest.mark.parametrize("version", ["2.11.0", "2.12.1", "2.13.0+cpu", "2.14.1", "2.15.0", "2.16.0.dev20261201+cu130", "3.0.0"])
def test_torch_2_11_and_newer_runs(version):
    compat.check_torch_version(version)


@pytest.mark.parametrize("version", ["2.10.0", "2.2.0", "1.13.1+cu117"])
def test_torch_older_than_2_11_is_refused_naming_the_version(version):
    with pytest.raises(UnsupportedTorch, match=rf"torch {re.escape(version)} is too old: graphtool needs torch 2.11 or newer") as info:
        compat.check_torch_version(version)
    assert info.value.exit_code == 2


def test_version_parse_is_numeric():
    assert compat.parse_torch_version("2.10.0") > compat.parse_torch_version("2.2.0")


@pytest.mark.parametrize("version", ["2.11.0", "2.13.0+cpu", "2.14.0", "2.15.0", "2.15.3+cu130"])
def test_tested_torch_gets_no_warning(version):
    assert compat.untested_torch_message(version) is None


@pytest.mark.parametrize("version", ["2.16.0", "2.16.0a0+git1234", "3.0.0"])
def test_newer_torch_warning_names_the_version_and_says_unverified(version):
    msg = compat.untested_torch_message(version)
    assert msg.startswith("graphtool: warning: ") and f"torch {version} " in msg
    assert "newest torch graphtool is tested with (2.15)" in msg and "unverified" in msg and SILENCE in msg


def test_newer_torch_warns_once_per_process_tree(monkeypatch):
    monkeypatch.setenv(SILENCE, "0")  # restored (unset) after the test
    out = io.StringIO()
    assert compat.warn_if_untested_torch("2.16.0", out) is True
    assert compat.warn_if_untested_torch("2.16.0", out) is False
    assert out.getvalue().count("graphtool: warning:") == 1
    assert os.environ[SILENCE] == "1"  # lint's child processes inherit it and stay quiet


def test_warning_can_be_silenced(monkeypatch):
    monkeypatch.setenv(SILENCE, "1")
    out = io.StringIO()
    assert compat.warn_if_untested_torch("2.16.0", out) is False and out.getvalue() == ""


def test_installed_torch_is_tested():
    """Fails on a torch newer than SUPPORTED_TORCH: once the rest of the suite passes there, add the
    release to graphtool.SUPPORTED_TORCH, docs/compat.md and the README's "Supported torch"."""
    compat.check_torch_version(torch.__version__)
    assert compat.untested_torch_message(torch.__version__) is None, compat.untested_torch_message(torch.__version__)
    assert compat.installed_torch_version().split("+")[0] == torch.__version__.split("+")[0]


def test_cli_on_a_newer_torch_runs_and_warns_once(cli, monkeypatch):
    monkeypatch.setenv(SILENCE, "0")
    monkeypatch.setattr(torch, "__version__", "2.99.0")
    rc, out, err = cli("trace", example("mlp.py"), "--inference", "--format", "json")
    assert rc == 0, err
    assert err.count("graphtool: warning: torch 2.99.0 is newer") == 1
    assert json.loads(out)["torch_version"] == "2.99.0"  # stdout stays one JSON document


def test_cli_on_an_older_torch_exits_2_naming_it(cli, monkeypatch):
    monkeypatch.setattr(torch, "__version__", "2.10.2")
    rc, out, err = cli("trace", example("mlp.py"), "--format", "json")
    assert rc == 2 and out == ""
    assert "graphtool: error: torch 2.10.2 is too old: graphtool needs torch 2.11 or newer" in err


def test_lint_checks_the_version_in_the_parent(cli, monkeypatch):
    """lint runs torch only in child processes: the parent refuses an old torch before spawning."""
    monkeypatch.setattr(versions, "installed_torch_version", lambda: "2.9.0")  # check_installed_torch's own module
    rc, _, err = cli("lint", example("mlp.py"))
    assert rc == 2 and "torch 2.9.0 is too old" in err


PRIVATE = [
    ("torch._dynamo", "reset"),
    ("torch._dynamo.backends.common", "aot_autograd"),
    ("torch._guards", "TracingContext"),
    ("torch._subclasses.fake_tensor", "FakeTensor"),
    ("torch._functorch.aot_autograd", "make_boxed_func"),
    ("torch._inductor.cudagraph_utils", "format_default_skip_message"),
    ("torch._inductor.cudagraph_utils", "check_multiple_devices_or_any_cpu_nodes"),
    ("torch._inductor.cudagraph_utils", "get_placeholder_info"),
    ("torch._inductor.cudagraph_utils", "get_mutation_stack_trace"),
    ("torch._dynamo.backends.cudagraphs", "get_device_node_mapping"),
    ("torch._dynamo.backends.cudagraphs", "find_input_mutations"),
    ("torch._inductor.utils", "get_first_incompatible_cudagraph_node"),
    ("torch._inductor.utils", "num_fw_fixed_arguments"),
    ("torch._inductor.utils", "count_tangents"),
    ("torch._dynamo.utils", "count_calls"),
    ("torch._functorch", "config"),
    ("torch._library.simple_registry", "singleton"),
    ("torch._dynamo.eval_frame", "skip_code"),
    ("torch._inductor", "config"),
    ("torch._dynamo", "config"),
    ("torch.multiprocessing.reductions", "StorageWeakRef"),
    ("torch.utils._python_dispatch", "TorchDispatchMode"),
    ("torch._ops", "HigherOrderOperator"),
    ("torch._functorch.aot_autograd", "run_functionalized_fw_and_collect_metadata"),
    ("torch._inductor.exc", "LoweringException"),
    ("torch._dynamo.exc", "Unsupported"),
    ("torch._dynamo.exc", "TorchRuntimeError"),
    ("torch._dynamo.exc", "InternalTorchDynamoError"),
    ("torch._dynamo.exc", "UserError"),
    ("torch._dynamo.symbolic_convert", "InstructionTranslator"),
    ("torch._dynamo.source", "LocalSource"),
]


@pytest.mark.parametrize("module, attr", PRIVATE)
def test_private_symbol_exists(module, attr):
    assert _lookup._require(module, attr) is not None




def test_op_arguments_names_the_schema():
    args = compat.op_arguments(torch.ops.aten._scaled_dot_product_flash_attention_for_cpu.default)
    dropout = next(a for a in args if a.name == "dropout_p")
    assert dropout.default_value == 0.0


def test_inductor_leaves_a_graph_with_no_call_uncompiled():
    """compile_fx_inner returns a graph with no call node as it is (the backward of ``y - 1``: the gradient passed
    through), so nothing of it is CUDA-graphed; one op is enough for inductor to compile it."""
    passthrough = torch.fx.symbolic_trace(lambda tangent: (tangent,))
    doubled = torch.fx.symbolic_trace(lambda tangent: (tangent * 2,))
    assert compat.inductor_leaves_uncompiled(passthrough)
    assert not compat.inductor_leaves_uncompiled(doubled)
    with torch._functorch.config.patch(bundled_autograd_cache=True):
        assert not compat.inductor_leaves_uncompiled(passthrough)


def test_the_fake_kernels_of_custom_ops_are_marked_for_dynamo_to_skip():
    """On meta an eager custom-op call runs its fake kernel as a Python frame: the stand-in marks every such
    kernel written outside torch (here one registered by a test-only library) so dynamo compiles none of them."""

    def _fake(x):
        return torch.empty_like(x)

    lib = torch.library.Library("graphtool_compat_test", "FRAGMENT")
    try:
        lib.define("double(Tensor x) -> Tensor")
        torch.library.register_fake("graphtool_compat_test::double", _fake, lib=lib)
        codes: dict = {}
        from torch._library.simple_registry import singleton

        holder = singleton.find("graphtool_compat_test::double").fake_impl
        for kernel in getattr(holder, "kernels", None) or [holder.kernel]:
            _user_codes(kernel.func, codes, os.path.dirname(torch.__file__) + os.sep)
        assert _fake.__code__ in codes.values()
        assert compat.skip_fake_kernel_frames() >= 1
    finally:
        lib._destroy()


def test_missing_symbol_names_version_and_symbol():
    with pytest.raises(UnsupportedTorch, match=rf"^torch {re.escape(torch.__version__)} has no torch._dynamo.no_such_thing, which graphtool needs$") as info:
        _lookup._require("torch._dynamo", "no_such_thing")
    assert info.value.exit_code == 2 and "graphtool --version" in info.value.hint


def test_missing_module_names_version_and_module():
    with pytest.raises(UnsupportedTorch, match=rf"^torch {re.escape(torch.__version__)} has no torch._inductor.no_such_module, "):
        _lookup._require("torch._inductor.no_such_module", "anything")


@pytest.mark.parametrize("reader, name, symbol", [
    (compat.inductor_flag, "triton.no_such_flag", "torch._inductor.config.triton.no_such_flag"),
    (compat.dynamo_flag, "no_such_flag", "torch._dynamo.config.no_such_flag"),
])
def test_missing_config_flag_names_version_and_flag(reader, name, symbol):
    with pytest.raises(UnsupportedTorch, match=rf"^torch {re.escape(torch.__version__)} has no {re.escape(symbol)}, "):
        reader(name)


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


def test_placeholder_source_reads_dynamos_grapharg():
    """Where dynamo took each graph input from: ``L['x']`` for a local, ``G['w']`` for a global."""
    import torch

    seen = []

    def keep(gm, _inputs):
        seen.extend(compat.placeholder_source(n) for n in gm.graph.find_nodes(op="placeholder"))
        return gm.forward

    torch._dynamo.reset()
    torch.compile(lambda x, xs: x + xs[0], backend=keep)(torch.ones(2), [torch.ones(2)])
    assert seen == ["L['x']", "L['xs'][0]"]


def test_value_guards_name_the_numbers_dynamo_baked_into_the_graph():
    """An int and a float argument used in the graph are guarded on their values (at the line using them); a bool
    left unused, a tensor and the attributes of ``self`` are not numbers of the frame's own."""
    import torch

    seen = []

    def keep(gm, _inputs):
        seen.extend(compat.value_guards())
        return gm.forward

    def f(x, pos: int, scale: float, flag: bool = True):
        return x * scale + pos

    torch._dynamo.reset()
    torch.compile(f, backend=keep)(torch.ones(2), 3, 0.5)
    torch._dynamo.reset()
    found = {name: (value, frames[-1][1] - f.__code__.co_firstlineno, function) for name, value, frames, function in seen}
    assert found == {"pos": (3, 1, "f"), "scale": (0.5, 1, "f")}
    assert compat.value_guards() == []  # outside a trace


def test_int_input_sources_name_what_an_aot_graphs_integers_stand_for():
    """An int argument made dynamic and a dynamic size, as AOT's forward graph takes them: ``L['pos']``, ``L['x'].size()[0]``."""
    import torch
    from torch._dynamo.backends.common import aot_autograd

    seen = []

    def fw(gm, _inputs):
        seen.append(compat.int_input_sources(gm))
        return gm

    torch._dynamo.reset()
    torch.compile(lambda x, pos: x[:pos] * 2, backend=aot_autograd(fw_compiler=fw), dynamic=True)(torch.ones(5), 3)
    torch._dynamo.reset()
    assert sorted(s for s in seen[-1] if s) == ["L['pos']", "L['x'].size()[0]"]


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


# -- where supported releases differ: each test runs on every torch and checks the side it is on --


@pytest.mark.parametrize("module, attr", sorted(compat.OPTIONAL))
def test_optional_symbol_resolves_or_is_absent(module, attr):
    """An optional symbol is either there or None, never an error; the table says what then."""
    obj = _lookup._optional(module, attr)
    assert obj is None or callable(obj) or isinstance(obj, bool)
    assert compat.OPTIONAL[(module, attr)]


def test_optional_symbol_in_a_missing_module_is_none():
    assert _lookup._optional("torch._inductor.no_such_module", "x") is None


def _graph_calling(op):
    """A graph whose first placeholder is the target of ``op(a, b)`` (only built, never run)."""
    g = torch.fx.Graph()
    a, b = g.placeholder("a"), g.placeholder("b")
    g.call_function(op, (a, b))
    g.output((a,))
    return torch.fx.GraphModule(torch.nn.Module(), g)


def test_input_storage_mutation_follows_torchs_own_targets():
    """2.13+ skip a graph that rebinds an input's storage, for exactly the ops torch lists (2.15
    added aten.shallow_copy_data_); 2.11/2.12 have no such check, so nothing is reported."""
    targets = getattr(importlib.import_module("torch._inductor.cudagraph_utils"), "INPUT_STORAGE_MUTATION_TARGETS", None)
    set_ = torch.ops.aten.set_.source_Tensor
    if targets is None:
        assert _lookup._optional("torch._inductor.cudagraph_utils", "get_input_storage_mutation_info") is None
        assert compat.input_storage_mutation_reason(_graph_calling(set_)) is None
        return
    assert set_ in targets
    for op in targets:
        reason = compat.input_storage_mutation_reason(_graph_calling(op))
        assert reason is not None and reason.startswith("input storage mutation (1 instances)"), (op, reason)
    assert compat.input_storage_mutation_reason(_graph_calling(torch.ops.aten.add_.Tensor)) is None
    shallow = getattr(torch.ops.aten, "shallow_copy_data_", None)
    if shallow is not None:  # torch 2.15+: the new op is a storage mutation too
        assert compat.input_storage_mutation_reason(_graph_calling(shallow.default)) is not None


def test_caching_allocator_check_only_where_torch_has_it(monkeypatch):
    monkeypatch.setenv("PYTORCH_NO_CUDA_MEMORY_CACHING", "1")
    check = _lookup._optional("torch._inductor.cudagraph_utils", "check_caching_allocator_for_cudagraphs")
    reason = compat.caching_allocator_reason()
    if check is None:  # torch 2.11/2.12: inductor never skips for the allocator
        assert reason is None
    elif not torch.cuda.is_available():
        assert reason == "skipping cudagraphs due to cudagraph capture requires the caching allocator; current allocator is uncached"


def _overlapping(device="cpu"):
    return torch.randn(10, device=device).as_strided((4, 4), (1, 1))  # sliding windows: elements share memory


def test_complex_memory_overlap_only_on_torch_that_checks_it():
    has_check = _lookup._optional("torch._inductor.output_code", "complex_memory_overlap") is not None
    expected = "skipping cudagraphs due to ['complex memory overlap']" if has_check else None
    assert compat.complex_memory_overlap_reason([_overlapping()]) == expected
    assert compat.complex_memory_overlap_reason([_overlapping("meta")]) == expected  # the stand-in's inputs
    for fine in (torch.randn(3).expand(4, 3), torch.randn(4, 4).t(), torch.randn(4)):
        assert compat.complex_memory_overlap_reason([fine, 3]) is None


def test_complex_memory_overlap_in_the_verdict():
    """End to end on the stand-in: inductor on 2.11/2.12 skips the forward; 2.13+ applies graphs."""
    from pathlib import Path

    from graphtool.analysis.cudagraphs.verdict import cudagraph_verdict
    from graphtool.capture.standin.meta import to_meta
    from graphtool.capture.tracer import trace_model
    from graphtool.capture.user.script import ModelSpec

    def windows(x):
        return x * 2

    spec = to_meta(ModelSpec(path=Path("inline.py"), entry="test", model=windows, args=(_overlapping(),), kwargs={}))
    v = cudagraph_verdict(trace_model(spec, backend="inductor", standin=True), backend="inductor")
    codes = [(r.code, r.graph, r.skips) for r in v.reasons]
    if _lookup._optional("torch._inductor.output_code", "complex_memory_overlap") is not None:
        assert codes == [("complex-memory-overlap", "inference", True)] and not v.eligible  # no input requires grad
    else:
        assert codes == [] and v.eligible


def _custom_class_base():
    """The base a custom-class (opaque) type must subclass: renamed in 2.14, None on 2.11."""
    for module, attr in (("torch._custom_class_base", "CustomClassBase"), ("torch._opaque_base", "OpaqueBase")):
        base = _lookup._optional(module, attr)
        if base is not None:
            return base
    return None


def test_custom_class_inputs_follow_inductors_own_check():
    """Inductor's non-Tensor-input check accepts custom-class objects from 2.12 on (OpaqueBase,
    renamed CustomClassBase in 2.14, with register_opaque_type -> register_custom_class and
    typ "reference" -> "symbolic"); 2.11 accepts none."""
    assert compat.cudagraph_input_type(torch.randn(2)) == "Tensor"
    assert compat.cudagraph_input_type(torch.nn.Parameter(torch.randn(2))) == "Parameter"
    assert compat.cudagraph_input_type(torch.Generator()) == "Generator"  # an opaque object itself on 2.13+
    assert compat.cudagraph_input_type(3) == "int"
    inductor_base = _lookup._optional("torch._inductor.output_code", "CustomClassBase") or _lookup._optional("torch._inductor.output_code", "OpaqueBase")
    base = _custom_class_base()
    if base is None:
        assert inductor_base is None
        return
    opaque = importlib.import_module("torch._library.opaque_object")

    class GraphtoolCompatProbe(base):
        pass

    if hasattr(opaque, "register_custom_class"):
        opaque.register_custom_class(GraphtoolCompatProbe, typ="symbolic")
    else:
        opaque.register_opaque_type(GraphtoolCompatProbe, typ="reference")
    expected = "CustomClass" if inductor_base is not None else "GraphtoolCompatProbe"
    assert compat.cudagraph_input_type(GraphtoolCompatProbe()) == expected


def test_package_metadata_never_caps_torch():
    """pip must never change a user's torch: the requirement has a floor and no ceiling or pin."""
    from pathlib import Path

    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        import tomli as tomllib

    deps = tomllib.loads((Path(__file__).parents[2] / "pyproject.toml").read_text())["project"]["dependencies"]
    (torch_req,) = [d for d in deps if re.match(r"torch\b(?!-)", d)]
    assert torch_req.replace(" ", "") == "torch>=2.11"
    lo, _ = SUPPORTED_TORCH
    assert torch_req.endswith(f"{lo[0]}.{lo[1]}")


def test_a_reloaded_script_is_not_guarded_against_its_previous_load():
    """A @torch.no_grad() function over a module-level module, loaded twice in one process (the
    stand-in moved the first load's module to meta): dynamo_reset lets the second load trace."""
    from graphtool.capture.standin.meta import to_meta
    from graphtool.capture.tracer import trace_model
    from graphtool.capture.user.script import load_model
    from tests.helpers import FIXTURES

    path = str(FIXTURES / "issue24" / "kv_function.py")
    trace_model(to_meta(load_model(path)), standin=True)
    cap = trace_model(load_model(path))
    assert len(cap.regions) == 1
    assert {r.name for r in cap.regions[0].inputs if r.kind == "parameter"} >= {"_step.qkv.weight", "_step.out.bias"}


def test_fake_tensors_and_the_tracing_context_are_told_apart():
    import torch
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode() as mode:
        fake = mode.from_tensor(torch.zeros(2))
    assert compat.is_fake_tensor(fake) and not compat.is_fake_tensor(torch.zeros(2))
    assert not compat.tracing_context_active()
    seen = []

    def backend(gm, example_inputs):
        seen.append(compat.tracing_context_active())
        return gm.forward

    compat.dynamo_reset()
    torch.compile(lambda x: x + 1, backend=backend)(torch.zeros(2))
    assert seen == [True]

# --- DDP under torch.compile (issue 26) -----------------------------------------------------------

def _ddp_gm():
    """A dynamo graph of 3 Linear(512, 512) as DDPOptimizer receives it, with its example inputs."""
    seen = []

    def backend(gm, example_inputs):
        seen.append((gm, list(example_inputs)))
        return gm.forward

    compat.dynamo_reset()
    model = torch.nn.Sequential(*[torch.nn.Linear(512, 512) for _ in range(3)])
    torch.compile(model, backend=backend)(torch.randn(2, 512))
    compat.dynamo_reset()
    return seen[0]


def test_ddp_optimizer_class_has_compile_fn():
    assert callable(compat.ddp_optimizer_class().compile_fn)


def test_ddp_first_bucket_bytes_is_one_mib():
    assert compat.ddp_first_bucket_bytes() == 1024 * 1024


def test_optimize_ddp_on_sets_and_restores_dynamo_config():
    before = torch._dynamo.config.optimize_ddp
    with compat.optimize_ddp_on():
        assert torch._dynamo.utils.get_optimize_ddp_mode() == "ddp_optimizer"
    assert torch._dynamo.config.optimize_ddp == before


def test_ddp_buckets_at_counts_parameter_bytes_from_the_last_layer_back():
    gm, example_inputs = _ddp_gm()
    layer = 512 * 513 * 4
    assert [b.size for b in compat.ddp_buckets_at(gm, example_inputs, 1024 * 1024)] == [layer] * 3
    # the last layer fills the first bucket (1 MiB); the other two share the next
    assert [b.size for b in compat.ddp_buckets_at(gm, example_inputs, 25 * 1024 * 1024)] == [2 * layer, layer]


def test_recording_ddp_splits_keeps_each_split_and_restores_compile_fn():
    gm, example_inputs = _ddp_gm()
    cls = compat.ddp_optimizer_class()
    original, records, seen = cls.compile_fn, [], []
    with compat.recording_ddp_splits(records, before=lambda g, ex: seen.append(g)):
        opt = cls(bucket_bytes_cap=1024 * 1024, backend_compile_fn=lambda g, ex, **kw: g.forward)
        opt.compile_fn(gm, example_inputs)
    assert cls.compile_fn is original and seen == [gm]
    assert len(records) == 1 and records[0][1] is gm and len(records[0][0].buckets) == 3


# --- FSDP2 in a fake process group (issue 26) ------------------------------------------------------

@pytest.fixture
def fake_group():
    import torch.distributed as dist

    compat.init_fake_process_group(4)
    try:
        yield
    finally:
        dist.destroy_process_group()


def test_ddp_on_meta_runs_ddp_steps_on_meta_parameters():
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP

    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    try:
        model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.Linear(8, 8)).to("meta")
        ddp = compat.ddp_on_meta(DDP(model, init_sync=False))
        for _ in range(2):  # the second step would rebuild the buckets
            ddp(torch.randn(2, 8, device="meta")).sum().backward()
        assert all(p.grad is not None and p.grad.device.type == "meta" for p in model.parameters())
        assert ddp.reducer._rebuild_buckets() is False
    finally:
        dist.destroy_process_group()


_DDP_STEPS_ON_META = """
import sys, torch, torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
from graphtool.capture import compat
dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
for quiet in (True, False):
    model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.Linear(8, 8)).to("meta")
    ddp = compat.ddp_on_meta(DDP(model, init_sync=False), **({} if quiet else {"quiet": False}))
    for _ in range(3):
        ddp(torch.randn(2, 8, device="meta")).sum().backward()
    print(f"quiet={quiet} done", file=sys.stderr, flush=True)
dist.destroy_process_group()
"""


@pytest.mark.slow  # a fresh process: torch warns once per process
def test_ddp_on_meta_keeps_the_c10d_loggers_time_stats_warning_off_stderr():
    """Was: "[rank0]:[W...] logger.cpp:329] Warning: Time stats are currently only collected for CPU and CUDA
    devices" under ``cudagraphs --ddp`` (the stand-in's DDP on meta), printed by torch's C++ straight to
    the process's stderr, once per process: a fresh process, its stderr read whole; ``quiet=False``
    (``--debug``) keeps it, which also shows this torch still warns."""
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-c", _DDP_STEPS_ON_META], capture_output=True, text=True, timeout=120,
                          cwd=os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    quiet, _, loud = done.stderr.partition("quiet=True done")
    assert "Time stats" not in quiet and "logger.cpp" not in quiet, quiet
    assert done.returncode == 0, done.stderr
    assert "Time stats" in loud or "logger.cpp" not in loud  # --debug: torch's own words (where this torch has them)


def test_fake_store_class_makes_a_group_of_any_world_size(fake_group):
    import torch.distributed as dist

    assert isinstance(compat.fake_store_class()(), dist.Store)
    assert dist.get_world_size() == 4 and dist.get_rank() == 0


def _sharded_blocks():
    from torch.distributed.fsdp import fully_shard

    model = torch.nn.Sequential(torch.nn.Linear(8, 10), torch.nn.Linear(10, 8))
    fully_shard(model[0])
    fully_shard(model)
    return model


def test_fsdp_param_group_and_sizes_name_the_padded_shard(fake_group):
    model = _sharded_blocks()
    model(torch.randn(2, 8))  # FSDP2 names its parameters at the root's lazy init
    sizes = compat.fsdp_param_sizes(compat.fsdp_param_group(model[0]))
    # 10 rows over 4 ranks: 3 rows each, padded; rank 0 owns 3
    assert sizes[0][:4] == ("0.weight", (10, 8), (3, 8), (3, 8))
    assert sizes[0][4] == torch.float32


def test_fsdp2_on_meta_runs_steps_on_meta_parameters_and_restores_torch(fake_group):
    from torch.distributed.fsdp import fully_shard
    from torch.distributed.fsdp._fully_shard import _fsdp_collectives
    from torch.distributed.fsdp._fully_shard._fsdp_param_group import FSDPParamGroup

    before = (_fsdp_collectives._get_device_handle, FSDPParamGroup._validate_no_meta_params)
    model = torch.nn.Sequential(torch.nn.Linear(8, 10), torch.nn.Linear(10, 8)).to("meta")
    fully_shard(model[0])
    fully_shard(model)
    with compat.fsdp2_on_meta(model):
        for _ in range(2):
            model(torch.randn(2, 8, device="meta")).sum().backward()
    grads = [p.grad for p in model.parameters()]
    assert all(g is not None and g.to_local().device.type == "meta" for g in grads)
    assert tuple(grads[0].to_local().shape) == (3, 8)  # 10 rows over 4 ranks: rank 0's shard
    assert (_fsdp_collectives._get_device_handle, FSDPParamGroup._validate_no_meta_params) == before


def test_skip_fsdp_hooks_is_on_by_default():
    # 2.13/2.14 dropped the flag (hooks always eager); where a release has it, True is its default
    assert compat.skip_fsdp_hooks() is True


def test_recording_fsdp_collectives_names_each_unit_and_restores_torch(fake_group):
    import torch.distributed as dist
    from torch.distributed.fsdp._fully_shard._fsdp_param_group import FSDPParamGroup

    before = (dist.all_gather_single, FSDPParamGroup.unshard, FSDPParamGroup.post_backward)
    model = _sharded_blocks()
    records = []
    names = {id(compat.fsdp_param_group(model[0])): "0", id(compat.fsdp_param_group(model)): ""}
    with compat.recording_fsdp_collectives(records, lambda g: names.get(id(g))):
        model(torch.randn(2, 8)).sum().backward()
    ops = [(op, unit) for op, _out, _in, unit in records]
    assert ("all_gather_single", "0") in ops and ("reduce_scatter_single", "") in ops
    gather = next(r for r in records if r[0] == "all_gather_single" and r[3] == "0")
    assert gather[1] == 4 * gather[2]  # receives every rank's padded shard, sends its own
    assert (dist.all_gather_single, FSDPParamGroup.unshard, FSDPParamGroup.post_backward) == before


def test_recompile_module_swaps_the_backend_of_module_compile():
    seen = []

    def backend(gm, example_inputs):
        seen.append(gm)
        return gm.forward

    class Double(torch.nn.Module):  # a user's module: dynamo skips torch's own modules' frames
        def forward(self, x):
            return x * 2

    compat.dynamo_reset()
    plain, compiled = Double(), Double()
    compiled.compile(backend="eager")
    assert compat.recompile_module(plain, backend) is False
    assert compat.recompile_module(compiled, backend) is True
    compiled(torch.randn(1, 2))
    assert len(seen) == 1
    compat.dynamo_reset()


def test_ddp_bucket_sizes_reads_ddps_logging_data():
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP

    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    try:
        model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.Linear(8, 8))
        sizes = compat.ddp_bucket_sizes(DDP(model))
        assert sum(sizes["bucket_sizes"]) == sizes["total_parameter_size_bytes"] == 2 * 72 * 4
        assert sizes["gradient_as_bucket_view"] is False
    finally:
        dist.destroy_process_group()


def test_init_fake_process_group_makes_one_process_any_rank_of_any_world_size():
    import torch.distributed as dist

    compat.init_fake_process_group(8, rank=5)
    try:
        assert (dist.get_rank(), dist.get_world_size()) == (5, 8)
        t = torch.ones(2)
        dist.all_reduce(t)  # returns at once, communicating nothing
        assert t.tolist() == [1.0, 1.0]
    finally:
        dist.destroy_process_group()


def test_process_group_sizes_names_each_live_group_with_its_ranks():
    import torch.distributed as dist

    assert compat.process_group_sizes() == {}  # no group yet
    compat.init_fake_process_group(4)
    try:
        assert compat.process_group_sizes() == {dist.group.WORLD.group_name: 4}
    finally:
        dist.destroy_process_group()


def test_inductors_import_adds_no_jit_deprecation_warnings(monkeypatch):
    # inductor imports torch.utils.mkldnn, whose ScriptModule classes warned "`torch.jit.script_method` is
    # deprecated" 14 times into the pytest summary of a user who never used torch.jit
    import sys
    import warnings

    monkeypatch.delitem(sys.modules, "torch.utils.mkldnn", raising=False)  # imported here, as on a first trace
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert _lookup._require("torch.utils.mkldnn", "MkldnnLinear") is not None
    assert not [w for w in caught if "script_method" in str(w.message)]


def test_aot_input_attribute_names_what_a_compiled_optimizer_reads():
    """A compiled optimizer's parameters and state are attributes of dynamo's graph, which AOT lifts as inputs
    (``ParamAOTInput(target=...)``): compat reads the attribute name, the tracer names the tensor behind it."""
    import torch

    from graphtool.capture.model_object import object_spec
    from graphtool.capture.tracer import trace_model

    w = torch.nn.Parameter(torch.ones(2))
    w.grad = torch.ones(2)
    opt = torch.optim.SGD([w], lr=0.1, momentum=0.9)
    opt.step()  # the momentum buffer exists: the compiled step writes it
    region = trace_model(object_spec(opt.step, ()), backend="aot_eager").regions[0]
    targets = [compat.aot_input_attribute(compat.node_descriptor(n)) for n in region.forward.graph.find_nodes(op="placeholder")]
    assert all(t in region.attributes for t in targets if t is not None) and sum(t is not None for t in targets) == 2
    assert {(rec.role, rec.ref.kind, rec.mutates_data) for rec in region.forward_inputs if rec.role == "attribute"} == {
        ("attribute", "parameter", True), ("attribute", "optimizer_state", True)}
    assert compat.aot_input_attribute(None) is None


@pytest.mark.parametrize("flag, kind", [("triton.reorder_for_reducing_graph_partitions", bool),
                                        ("triton.cudagraph_partition_memory_budget", float)])
def test_the_partition_reordering_flags_the_verdict_reads(flag, kind):
    """The cudagraphs verdict orders the ops as inductor's scheduler does before partitioning when this torch
    has ``reorder_for_reducing_graph_partitions`` on (analysis/cudagraphs/verdict.py ``_partition_order``); without
    the flag it keeps the graph's own order, so an absent flag must read as absent, not raise."""
    assert compat.has_inductor_flag(flag)
    assert isinstance(compat.inductor_flag(flag), kind)
    assert not compat.has_inductor_flag("triton.no_such_flag_anywhere")


def test_meta_kernels_over_composites_are_found_and_put_back():
    """``nll_loss`` has a Python Meta kernel shadowing its autograd decomposition on meta; the context takes it out
    and puts it back."""
    import torch

    from graphtool.capture import compat

    op = torch.ops.aten.nll_loss.default
    assert op in _meta_kernels_over_composites()
    with compat.composites_keep_autograd_on_meta() as removed:
        assert removed > 0 and torch._C.DispatchKey.Meta not in op.py_kernels
    assert torch._C.DispatchKey.Meta in op.py_kernels


def test_a_cross_entropy_loss_gives_gradients_on_meta_under_aot():
    import torch

    from graphtool.capture import compat

    torch._dynamo.reset()
    lin = torch.nn.Linear(4, 3).to("meta")
    x, y = torch.randn(2, 4, device="meta"), torch.randint(0, 3, (2,), device="meta")
    with compat.composites_keep_autograd_on_meta():
        torch.compile(lambda x, y: torch.nn.functional.cross_entropy(lin(x), y), backend="aot_eager")(x, y).backward()
    assert lin.weight.grad is not None
    torch._dynamo.reset()


# -- issue 35: the activation budget and live bytes


def test_the_min_cut_partitioner_is_where_inductor_and_aot_eager_call_it():
    import torch._functorch.partitioners as partitioners
    import torch._inductor.compile_fx as compile_fx

    assert callable(partitioners.min_cut_rematerialization_partition)
    assert callable(compile_fx.min_cut_rematerialization_partition)


def test_partition_at_budget_reruns_torchs_partitioner_on_a_recorded_joint():
    records: list = []

    def f(x, w):
        return (x @ w).relu().sin().sum()

    import torch._functorch.partitioners as partitioners
    from torch._dynamo.backends.common import aot_autograd

    def nop(gm, _):
        return gm.forward

    backend = aot_autograd(fw_compiler=nop, bw_compiler=nop,  # the partitioner looked up per call, as graphtool's
                           partition_fn=lambda *a, **k: partitioners.min_cut_rematerialization_partition(*a, **k))
    x, w = torch.randn(8, 8), torch.randn(8, 8, requires_grad=True)
    torch._dynamo.reset()
    with compat.recording_joint_partitions(records):
        torch.compile(f, backend=backend)(x, w).backward()
    torch._dynamo.reset()
    assert len(records) == 1
    saved = {b: [n.name for n in compat.partition_at_budget(records[0], b)[1].graph.nodes
                 if n.op == "placeholder" and not n.name.startswith("tangents")] for b in (1.0, 0.0)}
    assert saved[1.0] and len(saved[0.0]) <= len(saved[1.0]) + 2


@pytest.mark.skipif(not compat.has_region_activation_memory_budget(), reason="torch 2.13+: the per-region budget")
def test_region_budgets_in_eager_records_checks_and_puts_torchs_function_back():
    import torch.autograd.graph as graph

    original, code = graph.region_activation_memory_budget, graph.region_activation_memory_budget.__code__
    with pytest.raises(RuntimeError, match="torch.compile"):  # torch's own check, outside the window
        graph.region_activation_memory_budget(0.5)
    with compat.region_budgets_in_eager() as found:
        with graph.region_activation_memory_budget(0.25):
            y = torch.ones(2) * 2
        with pytest.raises(ValueError, match=r"\[0, 1\]"):
            graph.region_activation_memory_budget(1.5)
        with pytest.raises(TypeError):
            graph.region_activation_memory_budget(True)
    assert y.sum().item() == 4.0
    assert [(b, line) for b, _, line in found.entered] == [(0.25, found.entered[0][2])]
    assert found.entered[0][1] == __file__
    assert graph.region_activation_memory_budget is original and original.__code__ is code  # the same object


@pytest.mark.skipif(not compat.has_region_activation_memory_budget(), reason="torch 2.13+: the per-region budget")
def test_region_budget_of_reads_what_the_partitioner_reads():
    def f(x):
        with torch.autograd.graph.region_activation_memory_budget(0.0):
            return (x.sin() * 2).cos()

    graphs = []

    def backend(gm, _):
        graphs.append(gm)
        return gm.forward

    torch._dynamo.reset()
    torch.compile(f, backend=backend)(torch.randn(4))
    torch._dynamo.reset()
    assert compat.region_budget_of(graphs[0]) == 0.0
    assert compat.region_budget_of(torch.fx.symbolic_trace(lambda x: x + 1)) is None


def test_storage_weak_ref_expires_with_the_storage():
    t = torch.ones(4)
    ref = compat.storage_weak_ref(t)
    assert not ref.expired()
    del t
    assert ref.expired()


def test_mark_dynamic_and_the_marks_dynamo_reads():
    x = torch.ones(2, 3)
    compat.mark_dynamic(x, 1)
    compat.maybe_mark_dynamic(x, 0)
    assert compat.dynamic_marks(x) == (("_dynamo_dynamic_indices", (1,)), ("_dynamo_weak_dynamic_indices", (0,)))
    assert compat.dynamic_marks(torch.ones(2)) == ()


def test_the_settings_a_shape_schedule_reads():
    from graphtool.capture.schedule import settings_in_effect

    found = settings_in_effect()
    assert found["recompile_limit"] == 8 and found["automatic_dynamic_shapes"] is True
    assert {"cudagraph_dynamic_shape_warn_limit", "cudagraph_unexpected_rerecord_limit",
            "cudagraph_skip_dynamic_graphs"} <= found.keys()


def test_the_package_re_exports_every_public_name_of_its_modules():
    """compat is one module per torch area behind one set of names (issue 33): each public function, class and
    constant a module defines is in ``compat.__all__`` and is the same object there, so ``compat.X`` reaches it."""
    import ast
    import inspect
    import pkgutil

    defined = {}
    for info in pkgutil.iter_modules(compat.__path__):
        module = importlib.import_module(f"{compat.__name__}.{info.name}")
        for node in ast.parse(inspect.getsource(module)).body:
            targets = [node] if isinstance(node, (ast.FunctionDef, ast.ClassDef)) else getattr(node, "targets", [getattr(node, "target", None)])
            for name in [getattr(t, "name", None) or getattr(t, "id", None) for t in targets if t is not None]:
                if name and not name.startswith("_"):
                    defined[name] = getattr(module, name)
    assert sorted(defined) == sorted(compat.__all__)
    assert all(getattr(compat, name) is obj for name, obj in defined.items())


def test_fused_optimizers_on_meta_lets_a_fused_adamw_step_on_meta_and_puts_the_check_back():
    import torch

    from graphtool.capture import compat

    def step():
        p = torch.nn.Parameter(torch.randn(4, 4, device="meta"))
        p.grad = torch.randn(4, 4, device="meta")
        torch.optim.AdamW([p], fused=True).step()

    with pytest.raises(RuntimeError, match="fused=True"):
        step()  # torch's own list of devices with fused kernels has no meta
    with compat.fused_optimizers_on_meta():
        step()  # torch._fused_adamw_'s meta kernel runs
    with pytest.raises(RuntimeError, match="fused=True"):
        step()


def test_compiled_autograd_captures_counts_what_compiled_autograd_captured():
    import torch

    from graphtool.capture import compat

    before = compat.compiled_autograd_captures()
    w = torch.randn(3, requires_grad=True)

    def step(x):
        (x * w).sin().sum().backward()  # a backward inside the compiled call: compiled autograd captures it

    with torch._dynamo.config.patch(compiled_autograd=True):
        torch.compile(step, backend="eager")(torch.randn(3))
    assert compat.compiled_autograd_captures() == before + 1
    torch._dynamo.reset()


def test_recording_partitions_keeps_what_the_partitioner_returned_and_copies_stand_alone():
    import torch
    from torch._dynamo.backends.common import aot_autograd

    from graphtool.capture import compat

    parts: list = []
    with compat.recording_partitions(parts):
        partitioners = importlib.import_module("torch._functorch.partitioners")
        backend = aot_autograd(fw_compiler=lambda gm, _: gm, bw_compiler=lambda gm, _: gm,
                               partition_fn=partitioners.min_cut_rematerialization_partition)
        w = torch.randn(3, requires_grad=True)
        torch.compile(lambda x: (x * w).sin().sum(), backend=backend)(torch.randn(3)).backward()
    torch._dynamo.reset()
    assert len(parts) == 1
    forward, backward = parts[0]
    copy = compat.copy_graph_module(backward)
    nodes = len(copy.graph.nodes)
    backward.graph.create_node("call_function", torch.ops.aten.neg.default, (next(iter(backward.graph.nodes)),))
    assert len(backward.graph.nodes) == nodes + 1
    assert len(copy.graph.nodes) == nodes  # the copy does not follow later changes to the original
