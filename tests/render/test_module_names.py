"""One name for one module (issue 24): a model whose forward is wrapped the way transformers wraps
its models' forwards (dynamo reaches the model as ``L['args'][0]``) reads with the FQNs
``named_modules()`` gives, in memory, in the drawing and its folds, and in the report's node facts."""

from __future__ import annotations

import functools

import pytest

from graphtool.analysis.drawing import collapse, fx_drawing
from graphtool.analysis.module_names import module_fqn
from graphtool.analysis.node_facts import graph_facts
from tests.helpers import FIXTURES

WRAPPED = str(FIXTURES / "pictures" / "wrapped_forward.py")
PHI = str(FIXTURES / "pictures" / "phi_train.py")


@functools.cache
def _traced(path: str):
    from graphtool.capture.tracer import trace_model
    from graphtool.capture.user.script import load_model

    spec = load_model(path)
    return spec, trace_model(spec, backend="cudagraphs")


def _drawing(path: str):
    spec, capture = _traced(path)
    region = capture.regions[0]
    classes = {n: type(m).__name__ for n, m in spec.model.named_modules()}
    return fx_drawing(region.forward, "forward", region, classes=classes), classes


@pytest.mark.parametrize(("path", "fqn"), [
    ("L['self'].model.layers[0].mlp.fc1", "model.layers.0.mlp.fc1"),
    ("L['args'][0].model.layers.0.mlp.fc1", "model.layers.0.mlp.fc1"),  # transformers' wrapped forwards
    ("getattr(L['args'][0].layers, '1')._modules['fc']", "layers.1.fc"),
    ("L['kwargs']['self'].head", "head"),
    ("L['args'][0]", ""),
])
def test_dynamo_source_paths_read_as_fqns(path, fqn):
    assert module_fqn(path) == fqn


def _check_names(drawing, classes):
    clusters = {fqn for n in drawing.nodes for fqn, _ in n.module}
    assert clusters <= set(classes), f"names no module has: {sorted(clusters - set(classes))}"
    # a Linear's parameters and its ops sit in one cluster, not in two clusters of two names
    for fqn, cls in classes.items():
        if cls != "Linear":
            continue
        kinds = {n.kind for n in drawing.nodes if n.module and n.module[-1][0] == fqn}
        assert {"parameter", "op"} <= kinds, f"{fqn}: {kinds}"


def test_a_wrapped_forward_draws_one_cluster_per_module():
    drawing, classes = _drawing(WRAPPED)
    _check_names(drawing, classes)
    boxes = sorted(n.label.split("\n")[1] for n in collapse(drawing, 1).nodes if n.kind == "module")
    assert boxes == ["head", "layers.0-1", "wrapped_forward.py:42"]


def test_ops_a_forward_makes_through_one_helper_call_fold_into_a_box_named_after_it():
    drawing, _ = _drawing(WRAPPED)
    _, capture = _traced(WRAPPED)
    in_gate = {n.name for n in capture.regions[0].forward.graph.nodes if ", in gate" in (n.meta.get("stack_trace") or "")}
    made = [n for n in drawing.nodes if n.call]
    assert {n.call for n in made} == {"gate()\nwrapped_forward.py:42"}
    assert {n.id for n in made} == in_gate and {"sigmoid", "mul", "add"} <= {n.label for n in made}
    folded = collapse(drawing, 2)
    (box,) = [n for n in folded.nodes if n.label.startswith("gate()")]
    assert box.label == f"gate()\nwrapped_forward.py:42\n{len(in_gate)} nodes" and box.count == len(in_gate)
    assert not {n.id for n in made} & {n.id for n in folded.nodes}


def test_a_wrapped_forward_facts_and_memory_name_modules_as_named_modules():
    from graphtool.analysis.memory.saved import build_memory_report
    from graphtool.capture.memory.saved_tensors import capture_saved

    spec, capture = _traced(WRAPPED)
    region = capture.regions[0]
    facts = graph_facts(region.forward, "forward", region)
    modules = {f["module"] for f in facts.values() if f["module"]}
    assert "head (Linear)" in modules and "layers.1.fc2 (Linear)" in modules
    assert not any(m.startswith(("L.", "args", "0.")) for m in modules), modules
    eager = capture_saved(spec)
    report = build_memory_report(eager, capture, by="module")
    compiled = {t.module for t in report.compiled.tensors if t.module}
    assert compiled and compiled <= set(classes_of(spec)), sorted(compiled)
    eager_names = {t.module for t in report.eager.tensors if t.module}
    assert compiled & eager_names


def classes_of(spec):
    return {n for n, _ in spec.model.named_modules()}


@pytest.mark.slow
def test_phi_draws_and_folds_by_its_module_names():
    pytest.importorskip("transformers")
    drawing, classes = _drawing(PHI)
    _check_names(drawing, classes)
    # parameters sit in their module's cluster, not in one far row outside every module
    assert all(n.module for n in drawing.nodes if n.kind == "parameter")
    folded = collapse(drawing, 1)
    modules = [n for n in folded.nodes if n.kind == "module" and not n.label.split("\n")[0].endswith("()")]
    calls = [n.label.split("\n")[0] for n in folded.nodes if n.kind == "module" and n not in modules]
    assert sorted(n.label.split("\n")[1] for n in modules) == ["lm_head", "model"]  # not "0"
    assert calls == ["loss_function()"]  # the loss from labels, one box


def _png_size(path) -> tuple[int, int]:
    import struct

    return struct.unpack(">II", path.read_bytes()[16:24])


@pytest.mark.slow
def test_phi_picture_opens_folded_to_a_readable_size(cli, tmp_path):
    """Issue 24: Phi's forward PNG was 14098 x 9983 pixels, every op drawn; now it opens folded by
    module, a few dozen boxes named as the model names its modules."""
    pytest.importorskip("transformers")
    out = tmp_path / "phi.png"
    rc, _, err = cli("render", PHI, "--graph", "forward", "-o", out)
    assert rc == 0, err
    assert "folded by module at depth" in err
    width, height = _png_size(out)
    assert width <= 2500 and height <= 3500, (width, height)  # was 14098 x 9983
    rc, _, err = cli("render", PHI, "--graph", "forward", "-f", "dot", "-o", tmp_path / "phi.dot")
    dot = (tmp_path / "phi.dot").read_text()
    assert "PhiDecoderLayer" in dot and "model.layers.0" in dot and "L.args" not in dot and "0.model" not in dot


@pytest.mark.slow
def test_phi_report_opens_folded_with_every_module_named():
    pytest.importorskip("transformers")
    from graphtool.commands.report import report

    (r,) = report(PHI, memory=False)
    _, classes = _drawing(PHI)
    for p in r.pictures:
        opened = p.levels[p.default]
        assert opened.depth is not None and opened.boxes <= 100, (p.graph, opened.name, opened.boxes)  # every node: 366, 451
        modules = {f["module"].rsplit(" (", 1)[0] for f in p.facts.values() if f["module"]}
        assert modules and modules <= set(classes), sorted(modules - set(classes))
