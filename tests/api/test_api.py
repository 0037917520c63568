"""graphtool's API on model objects: the same reports as the script path, the model left as it was."""

from __future__ import annotations

import json
from importlib import resources

import pytest

import graphtool
from graphtool import commands
from tests.helpers import FIXTURES, example

torch = pytest.importorskip("torch")


def _without_model(doc: dict) -> dict:
    """A report document without where the model came from (a script's factory, an object's class)."""
    doc = json.loads(json.dumps(doc, default=str))
    doc.pop("model", None)
    return doc


def _script_doc(command: str, path: str) -> dict:
    import importlib

    run = getattr(importlib.import_module(f"graphtool.commands.{command}"), command)
    (result,) = run(path)
    return _without_model(result.to_dict())


def _object_doc(command: str, path: str) -> dict:
    from graphtool.capture.user.script import load_model

    spec = load_model(path)
    return _without_model(getattr(graphtool, command)(spec.model, *spec.args, model_kwargs=spec.kwargs).to_dict())


@pytest.mark.parametrize("command, name", [
    ("trace", "mlp.py"),
    ("mutations", "mutate_input.py"),
    pytest.param("trace", "graph_breaks.py", marks=pytest.mark.slow),
    pytest.param("devices", "cpu_roundtrip.py", marks=pytest.mark.slow),
    pytest.param("cudagraphs", "convnet_bn.py", marks=pytest.mark.slow),
    pytest.param("cudagraphs", str(FIXTURES / "standin" / "static_cache_write.py"), marks=pytest.mark.slow),
    pytest.param("memory", "mlp.py", marks=pytest.mark.slow),
    pytest.param("cudagraphs", "item_branch.py", marks=pytest.mark.slow),  # the stand-in replays values recorded on the object
    pytest.param("mutations", "transpose_input.py", marks=pytest.mark.slow),  # t_(): a metadata mutation, put back
])
def test_a_script_and_the_object_it_builds_give_the_same_report(command, name):
    path = name if "/" in name else example(name)
    assert _object_doc(command, path) == _script_doc(command, path)


def test_an_input_transposed_in_place_gets_its_shape_back():
    def transpose_in_place(x):
        x.t_()
        return x + 1

    x = torch.arange(6.0).reshape(2, 3)
    assert graphtool.mutations(transpose_in_place, x).mutated_inputs[0].mutates_metadata
    assert x.shape == (2, 3) and x.stride() == (3, 1) and torch.equal(x, torch.arange(6.0).reshape(2, 3))


def test_the_trace_document_validates_against_the_cli_schema_and_has_fields_to_assert_on():
    jsonschema = pytest.importorskip("jsonschema")
    from graphtool.capture.user.script import load_model

    schema = json.loads(resources.files("graphtool.schema").joinpath("report.schema.json").read_text())
    spec = load_model(example("graph_breaks.py"))
    r = graphtool.trace(spec.model, *spec.args)
    jsonschema.validate(r.to_dict(), schema)
    assert [(b.line, b.code) for b in r.graph_breaks][:1] == [(13, "gb0059")]  # print(...) in forward
    assert r.summary() == "1 compiled region, 2 graph breaks, 1 skipped frame, 0 inputs mutated"
    assert r.mutated_inputs == []
    assert r.to_dict()["model"]["entry"] == "Breaky" and r.to_dict()["model"]["path"] == example("graph_breaks.py")


def test_the_memory_document_validates_against_its_schema():
    jsonschema = pytest.importorskip("jsonschema")
    schema = json.loads(resources.files("graphtool.schema").joinpath("memory.schema.json").read_text())
    net = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU())
    jsonschema.validate(graphtool.memory(net, torch.randn(2, 4)).to_dict(), schema)


def test_the_verdict_and_mutations_are_fields():
    def bump(total, x):
        total.add_(x)
        return total * 2

    total = torch.zeros(3)
    m = graphtool.mutations(bump, total, torch.ones(3))
    assert [x.name for x in m.mutated_inputs] == ["total"] and m.found
    assert m.to_dict()["model"]["entry"].endswith("bump")
    assert torch.equal(total, torch.zeros(3))  # put back
    v = graphtool.cudagraphs(bump, total, torch.ones(3))
    assert not v.eligible and any(r.skips for r in v.reasons)
    assert "mutated" in v.text()
    bundle = v._repr_mimebundle_()
    assert bundle["text/plain"] == v.text() and bundle["text/html"] == v._repr_html_()
    assert bundle["text/html"].startswith('<iframe class="graphtool" srcdoc="&lt;!DOCTYPE html&gt;')
    page = v.html()  # the report page's own CUDA-graphs section, the findings as the CLI prints them
    assert "<h2>CUDA graphs</h2>" in page and "CG011 skipping cudagraphs due to mutated inputs" in page
    assert "viewer" not in page.split("<main>")[1].split("</main>")[0]  # one section, no pictures
    assert repr(v).startswith("<graphtool cudagraphs: CUDA graphs would be skipped")


def test_render_returns_dot_or_svg_text_or_writes_a_file(tmp_path):
    net, x = torch.nn.Linear(4, 2), torch.randn(3, 4)
    assert graphtool.render(net, x, fmt="dot").startswith("digraph")
    assert "<svg" in graphtool.render(net, x)[:400]
    out = graphtool.render(net, x, graph="forward", output=tmp_path / "f.dot")
    assert out == tmp_path / "f.dot" and out.read_text().startswith("digraph")


class _Counter(torch.nn.Module):
    """BatchNorm (running statistics), dropout (RNG) and an input written in place."""

    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(4, 4)
        self.bn = torch.nn.BatchNorm1d(4)
        self.drop = torch.nn.Dropout(0.5)

    def forward(self, x, cache):
        cache.add_(1)
        return self.drop(self.bn(self.fc(x))).sum() + cache.sum()


def test_the_model_state_is_left_as_it_was():
    net = _Counter().train()
    net.bn.eval()  # a flag inside the model the trace must not reset
    x, cache = torch.randn(3, 4), torch.zeros(2)
    for p in net.parameters():
        p.grad = torch.full_like(p, 7.0)
    grads = {n: p.grad for n, p in net.named_parameters()}
    state = {k: v.clone() for k, v in net.state_dict().items()}
    rng = torch.get_rng_state()
    with torch.no_grad():
        graphtool.trace(net, x, cache, cudagraphs="inductor")  # own-device and stand-in traces
        graphtool.memory(net, x, cache)
        assert not torch.is_grad_enabled()
    assert all(torch.equal(state[k], v) for k, v in net.state_dict().items())
    assert {n: p.grad for n, p in net.named_parameters()} == grads  # the same tensors...
    assert all(torch.equal(p.grad, torch.full_like(p, 7.0)) for p in net.parameters())  # ...unchanged
    assert net.training and not net.bn.training
    assert torch.equal(cache, torch.zeros(2))
    assert torch.equal(torch.get_rng_state(), rng)
    assert all(p.device.type == "cpu" for p in net.parameters())


def test_a_backward_the_caller_still_holds_survives_a_trace():
    net = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.BatchNorm1d(4).eval())
    x = torch.randn(3, 4, requires_grad=True)
    h = x * 2  # an input with history: saved by the caller's own graph below
    y = (h * h).sum()
    x.grad = torch.zeros(3, 4)
    graphtool.trace(net, h)  # a training trace: its backward must stop at h
    graphtool.trace(net, x)  # x itself as the input: its .grad is set aside and put back
    assert torch.equal(x.grad, torch.zeros(3, 4))
    y.backward()  # would raise had graphtool's backward run through (and freed) the caller's graph
    assert torch.equal(x.grad, 4 * h.detach())


def test_the_stand_in_is_a_meta_copy_keeping_tied_weights_and_static_marks():
    from graphtool.capture.model_object import object_spec
    from graphtool.capture.standin.meta import copy_to_meta

    class Tied(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = torch.nn.Embedding(5, 4)
            self.out = torch.nn.Linear(4, 5, bias=False)
            self.out.weight = self.emb.weight
            self.cache = [torch.zeros(2, 4)]  # a tensor Module.to would miss

        def forward(self, i):
            return self.out(self.emb(i) + self.cache[0][0])

    net, cache_input = Tied(), torch.zeros(3)
    torch._dynamo.mark_static_address(cache_input)
    spec = object_spec(net, (torch.tensor([1, 2]), cache_input))
    copy = copy_to_meta(spec)
    assert copy.model is not net and copy.model.emb.weight is copy.model.out.weight
    assert copy.model.emb.weight.device.type == "meta" and copy.model.cache[0].device.type == "meta"
    assert copy.args[1].device.type == "meta" and copy.args[1]._dynamo_static_input_type == "unguarded"
    assert net.emb.weight.device.type == "cpu" and net.cache[0].device.type == "cpu" and cache_input.device.type == "cpu"
    assert net.out.weight is net.emb.weight and not copy.borrowed


def test_options_are_checked_as_the_cli_checks_them():
    from graphtool.errors import UsageError

    net = torch.nn.Linear(2, 2)
    with pytest.raises(UsageError, match="--backend 'tvm'"):
        graphtool.trace(net, torch.ones(1, 2), backend="tvm")
    with pytest.raises(UsageError, match="device='cuda:3'"):
        graphtool.trace(net, torch.ones(1, 2), device="cuda:3")


def test_model_keyword_arguments_go_in_model_kwargs_and_an_unknown_option_is_an_error():
    """The model's keyword arguments go in ``model_kwargs``; a keyword graphtool does not take is a usage error, not a
    keyword argument of the model (``ddp=`` once passed into the model's ``**kwargs`` and ran a plain trace)."""
    from graphtool.errors import UsageError

    def f(x, *, backend, scale=1.0, **rest):
        return (x * scale).sum() if backend == "b" and not rest else x.sum()

    r = graphtool.trace(f, torch.ones(2), model_kwargs={"backend": "b", "scale": 2.0})
    assert r.summary().startswith("1 compiled region")
    with pytest.raises(UsageError, match=r"trace\(\) got an unknown option scale=") as err:
        graphtool.trace(f, torch.ones(2), scale=2.0, model_kwargs={"backend": "b"})
    assert "model_kwargs" in err.value.hint
    with pytest.raises(UsageError, match=r"unknown option fsdp=") as err:
        graphtool.load(f, torch.ones(2), fsdp=True)
    assert "did you mean fsdp2=" in err.value.hint


def test_commands_still_take_script_paths():
    (r,) = commands.mutations.mutations(example("mutate_input.py"))
    assert r.report.verdict() == "1 user input mutated"


@pytest.mark.slow
def test_trace_with_bench_and_graph_code_carries_both_into_the_document():
    jsonschema = pytest.importorskip("jsonschema")
    schema = json.loads(resources.files("graphtool.schema").joinpath("report.schema.json").read_text())
    net = torch.nn.Linear(4, 2)
    r = graphtool.trace(net, torch.randn(3, 4), bench=True, graph_code=True, cudagraphs="cudagraphs")
    doc = r.to_dict()
    jsonschema.validate(doc, schema)
    assert doc["bench"]["modes"] and doc["cudagraphs"]["eligible"] is True
    assert any(name.startswith("forward") for name in r.extra["graph_code"])


def test_a_function_over_module_globals_and_closures_runs_on_the_stand_in_and_leaves_them_alone():
    """A model passed as a function that reads a module-level Linear and tensor (through a helper) and a
    closure's Linear: the stand-in copies each to meta and rebinds the functions to the copies, so the
    CUDA-graph verdict runs, and the caller's module, functions and closure keep their CPU tensors."""
    import importlib.util

    from tests.helpers import FIXTURES

    spec = importlib.util.spec_from_file_location("global_function", FIXTURES / "issue24" / "global_function.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    weight = mod.net.weight
    r = graphtool.cudagraphs(mod.step, torch.randn(2, 4))
    assert r.eligible
    t = graphtool.trace(mod.step, torch.randn(2, 4), device="meta")
    assert t.summary().startswith("1 compiled region")
    assert mod.net.weight is weight and weight.device.type == "cpu" and mod.scale.device.type == "cpu"
    assert mod.helper.__globals__ is vars(mod) and mod.step.__globals__["net"] is mod.net
    assert mod.head_fn.__closure__[0].cell_contents.weight.device.type == "cpu"
