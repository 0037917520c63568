"""The trace report agrees with what torch gives when called directly."""

from __future__ import annotations

import json
from importlib import resources

import pytest
import torch

from graphtool.analysis.trace_report import build_trace_report
from graphtool.capture.user.script import load_model
from tests.helpers import example, traced


def _bare_aot_graphs(spec):
    """The bare torch way: torch.compile with an aot_autograd backend that keeps the graphs."""
    from functorch.compile import make_boxed_func
    from torch._dynamo.backends.common import aot_autograd

    graphs = {"forward": [], "backward": []}

    def keep(kind):
        def compiler(gm, _):
            graphs[kind].append(gm)
            return make_boxed_func(gm.forward)

        return compiler

    torch._dynamo.reset()
    out = torch.compile(spec.model, backend=aot_autograd(fw_compiler=keep("forward"), bw_compiler=keep("backward")))(
        *spec.args, **spec.kwargs
    )
    out.sum().backward()
    return graphs


@pytest.mark.parametrize("name", ["mlp.py", "convnet_bn.py", "transformer.py"])
def test_node_counts_equal_direct_torch_api(name):
    report = build_trace_report(traced(name))
    bare = _bare_aot_graphs(load_model(example(name)))
    assert [r.forward.nodes for r in report.regions] == [len(g.graph.nodes) for g in bare["forward"]]
    assert [r.backward.nodes for r in report.regions] == [len(g.graph.nodes) for g in bare["backward"]][::-1] or [
        r.backward.nodes for r in report.regions
    ] == [len(g.graph.nodes) for g in bare["backward"]]


@pytest.mark.parametrize("name", ["mlp.py", "convnet_bn.py", "transformer.py", pytest.param("hf_gpt2.py", marks=pytest.mark.slow)])  # GPT-2: 10 s
def test_parameter_placeholders_are_named_by_fqn(name):
    cap = traced(name)
    report = build_trace_report(cap)
    targets = {p.target for r in report.regions for p in r.forward.placeholders if p.kind == "parameter"}
    assert targets == set(dict(cap.spec.model.named_parameters()).keys())


def test_buffers_user_inputs_and_tangents_are_classified():
    report = build_trace_report(traced("convnet_bn.py"))
    fw = report.regions[0].forward
    kinds = {p.name: p.kind for p in fw.placeholders}
    assert kinds["bn.running_mean"] == "buffer" and kinds["bn.num_batches_tracked"] == "buffer"
    assert kinds["x"] == "user_input"
    bw = report.regions[0].backward
    assert [p.kind for p in bw.placeholders].count("tangent") == 1
    grads = {o.name for o in bw.outputs if o.kind == "gradient"}
    assert grads == {"conv.weight", "conv.bias", "bn.weight", "bn.bias", "fc.weight", "fc.bias"}
    written_back = {o.name for o in fw.outputs if o.kind == "mutated_input"}
    assert written_back == {"bn.running_mean", "bn.running_var", "bn.num_batches_tracked"}


def test_forward_ops_carry_the_users_line():
    report = build_trace_report(traced("mlp.py"))
    lines = {n.source.line for n in report.regions[0].forward.op_nodes if n.source}
    assert 13 in lines  # return self.fc2(torch.relu(self.fc1(x)))
    bw_lines = {n.source.line for n in report.regions[0].backward.op_nodes if n.source}
    assert 13 in bw_lines


def test_graph_breaks_give_regions_in_order():
    cap = traced("item_branch.py")
    report = build_trace_report(cap)
    assert len(report.regions) == 2
    assert [(b.line, "item()" in b.reason) for b in report.breaks] == [(13, True)]
    (d,) = [d for d in report.diagnostics() if d.code == "GT-B001"]
    assert d.source[d.col - 1:d.col - 1 + d.span] == "y.sum().item()"  # not the whole `if ...:` line


def test_a_value_handed_across_a_graph_break_is_named_as_the_users_code_names_it():
    # def f(x): y = x * 2; print(...); return y + 1 -- region 1's input is the local y, not dynamo's l_y_ of kind other
    from graphtool.capture.tracer import trace_model

    report = build_trace_report(trace_model(load_model("tests/fixtures/breaks/print_mid.py"), backend="cudagraphs"))
    inputs = [[(p.name, p.kind) for p in r.forward.placeholders] for r in report.regions]
    assert inputs == [[("x", "user_input")], [("y", "intermediate")]]


def test_the_second_size_of_a_dynamic_trace_is_the_forwards_own_input():
    from graphtool.capture.tracer import trace_model

    cap = trace_model(load_model(example("dynamic_batch.py")), backend="cudagraphs", dynamic=True)
    tensors = [(i.name, i.kind) for i in cap.regions[-1].inputs if i.kind != "other"]  # s0: the size symbol
    assert ("input", "user_input") in tensors and not any(k == "intermediate" for _, k in tensors)


def test_inference_has_no_backward():
    report = build_trace_report(traced("mlp.py", inference=True))
    assert report.regions[0].backward is None
    assert report.training is False


def test_json_validates_against_schema(cli):
    jsonschema = pytest.importorskip("jsonschema")
    schema = json.loads(resources.files("graphtool.schema").joinpath("report.schema.json").read_text())
    for name in ("convnet_bn.py", "view_outputs.py", "item_branch.py"):
        rc, out, _ = cli("trace", example(name), "--format", "json", "--cudagraphs", "inductor")
        assert rc == 0
        jsonschema.validate(json.loads(out), schema)


def test_yaml_is_the_same_document(cli):
    import yaml

    _, out_json, _ = cli("trace", example("mlp.py"), "--format", "json")
    _, out_yaml, _ = cli("trace", example("mlp.py"), "--format", "yaml")
    assert yaml.safe_load(out_yaml)["graphs"] == json.loads(out_json)["graphs"]


def test_out_writes_code_and_report(cli, tmp_path):
    rc, _, err = cli("trace", example("item_branch.py"), "--out", tmp_path / "o", "--format", "json")
    assert rc == 0
    names = sorted(p.name for p in (tmp_path / "o").iterdir())
    assert names == ["backward.py", "backward_region1.py", "forward.py", "forward_region1.py", "report.json"]
    assert "def forward" in (tmp_path / "o" / "forward.py").read_text()
    json.loads((tmp_path / "o" / "report.json").read_text())


def test_no_output_left_behind_on_failure(cli, tmp_path):
    from tests.helpers import FIXTURES

    rc, _, _ = cli("trace", FIXTURES / "bad" / "forward_raises.py", "--out", tmp_path / "o")
    assert rc == 2
    assert not (tmp_path / "o").exists()


def test_user_prints_do_not_pollute_json(cli):
    rc, out, err = cli("trace", example("graph_breaks.py"), "--format", "json")
    assert rc == 0
    json.loads(out)
    assert "logging from forward" in err


def test_meta_device_builds_without_memory():
    cap_spec = load_model(example("mlp.py"), device="meta")
    assert all(p.device.type == "meta" for p in cap_spec.model.parameters())


def test_kwargs_and_function_models():
    cap = traced("mutate_input.py")
    names = {ref.name for r in cap.regions for ref in r.inputs}
    assert {"total", "x"} <= names


def test_a_global_tensor_that_requires_grad_is_a_parameter_with_a_gradient():
    # module-level w = torch.randn(..., requires_grad=True) used by a function: it was a 'buffer', and no backward ran
    from graphtool.capture.tracer import trace_model

    report = build_trace_report(trace_model(load_model("tests/fixtures/global_weight.py"), backend="cudagraphs"))
    region = report.regions[0]
    assert {p.name: p.kind for p in region.forward.placeholders} == {"x": "user_input", "w": "parameter", "scale": "buffer"}
    assert report.training and [o.name for o in region.backward.outputs if o.kind == "gradient"] == ["w"]


@pytest.mark.slow  # over 6 s: the slow tier (docs/ci.md)
def test_llama_config_traces():
    report = build_trace_report(traced("hf_llama.py"))
    assert report.regions and report.regions[0].backward is not None


def test_a_break_in_library_code_points_at_the_users_call_as_lint_does(cli):
    """A break inside a library helper (breaklib.scale calls torch._dynamo.graph_break()): trace points at the
    user's call that led there, the library line named beside it, as lint does (issue 45: the two placed one break
    at opposite ends); a library model of its own (no user frame) stays at the library line, never at the factory's
    def line."""
    from tests.helpers import FIXTURES

    model = FIXTURES / "breaks" / "helper_break.py"
    lib = FIXTURES / "breaks" / "site-packages" / "breaklib" / "__init__.py"
    rc, out, _ = cli("trace", model, "--format", "json")
    doc = json.loads(out)
    (b,) = doc["graph_breaks"]
    assert (b["file"], b["line"]) == (str(model), 19)  # return breaklib.scale(y).relu()
    assert (b["library_file"], b["library_line"]) == (str(lib), 8)
    from tests.analysis.test_report_schema import SCHEMA, jsonschema

    jsonschema.validate(doc, SCHEMA)
    import graphtool

    (linted,) = graphtool.load(str(model)).lint().to_dict()["models"][0]["breaks"]  # lint's worker, in this process
    assert (linted["file"], linted["line"], linted["library_file"], linted["library_line"]) == (
        b["file"], b["line"], b["library_file"], b["library_line"])
    rc, out, _ = cli("trace", f"{model}:get_library_model")
    assert "__init__.py:8:5: GT-B001" in out and "torch._dynamo.graph_break()" in out
    assert "(in " not in out and "helper_break.py:26" not in out  # no user frame; not the factory
    rc, out, _ = cli("trace", model)
    assert "helper_break.py:19" in out and "GT-B001" in out and "__init__.py:8)" in out
