"""graphtool render: golden DOT, truth against a direct grad_fn walk, real pictures."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from graphtool.analysis.drawing import autograd_drawing, collapse
from graphtool.capture.autograd_graph import capture_autograd
from graphtool.capture.user.script import load_model
from graphtool.render.dot import to_dot
from tests.helpers import example

GOLDEN = Path(__file__).resolve().parents[1] / "golden"


def _direct_walk(spec):
    out = spec.model(*spec.args, **spec.kwargs)
    seen, edges, stack = set(), 0, [out.grad_fn]
    while stack:
        fn = stack.pop()
        if fn in seen:
            continue
        seen.add(fn)
        for nf, _ in fn.next_functions:
            if nf is not None:
                edges += 1
                stack.append(nf)
    return seen, edges


@pytest.mark.parametrize("name", ["mlp.py", "convnet_bn.py", "transformer.py"])
def test_autograd_counts_equal_a_direct_walk(name):
    graph = capture_autograd(load_model(example(name)))
    seen, edges = _direct_walk(load_model(example(name)))
    assert len(graph.nodes) == len(seen)
    assert len(graph.edges) == edges


@pytest.mark.parametrize("name", ["mlp.py", "convnet_bn.py", "transformer.py"])
def test_every_parameter_is_a_leaf_with_its_fqn(name):
    spec = load_model(example(name))
    graph = capture_autograd(spec)
    leaves = {n.name: n for n in graph.nodes if n.kind == "parameter"}
    params = dict(spec.model.named_parameters())
    assert set(leaves) == set(params)
    for fqn, leaf in leaves.items():
        assert leaf.shape == tuple(params[fqn].shape) and leaf.dtype == "float32"


def test_user_inputs_that_require_grad_are_named():
    from graphtool.capture.user.script import ModelSpec

    spec = ModelSpec(Path("x.py"), "f", lambda a, b: (a * b).sum(), (torch.randn(3, requires_grad=True), torch.randn(3)))
    graph = capture_autograd(spec)
    assert [n.name for n in graph.nodes if n.kind == "user_input"] == ["a"]


def test_saved_tensors_shapes():
    graph = capture_autograd(load_model(example("mlp.py")), saved=True)
    addmm = [n for n in graph.nodes if n.op == "AddmmBackward0"]
    assert ("mat1", (8, 64)) in addmm[0].saved


@pytest.mark.parametrize("name", ["mlp.py", "convnet_bn.py"])
def test_golden_dot(name):
    torch.manual_seed(0)
    vg = autograd_drawing(capture_autograd(load_model(example(name)), saved=True), f"autograd graph of {name}")
    text = to_dot(vg)
    golden = GOLDEN / f"{Path(name).stem}-autograd.dot"
    if os.environ.get("GRAPHTOOL_UPDATE_GOLDEN") == "1":
        golden.write_text(text)
    assert text == golden.read_text()


def test_dot_is_deterministic_and_colours_come_from_names():
    from graphtool.render.dot import colour

    a = to_dot(autograd_drawing(capture_autograd(load_model(example("transformer.py")))))
    b = to_dot(autograd_drawing(capture_autograd(load_model(example("transformer.py")))))
    assert a == b
    families = ["addmm", "relu", "mm", "add", "mul", "softmax", "layernorm", "t", "view", "gelu"]
    # the same colours in another interpreter with another hash seed: stable from run to run
    code = f"from graphtool.render.dot import colour; print([colour(f) for f in {families!r}])"
    env = {**os.environ, "PYTHONHASHSEED": "12345"}
    other = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True).stdout
    assert other.strip() == str([colour(f) for f in families])
    assert len({colour(f) for f in families}) > 3


def test_collapse_folds_identical_layers():
    spec = load_model(str(Path(__file__).resolve().parents[2] / "benchmarks" / "encoder12.py"))
    vg = autograd_drawing(capture_autograd(spec))
    top = collapse(vg, 1)  # depth 1: the encoder's children, `layers` (a ModuleList) among them
    assert [n.label.split("\n")[:2] for n in top.nodes if n.kind == "module"] == [["ModuleList", "layers"]]
    small = collapse(vg, 2)  # depth 2: layers.N; layer 0 differs (no grad for the input)
    labels = [n.label.split("\n")[:2] for n in small.nodes if n.kind == "module"]
    assert sorted(labels) == [["11 x TransformerEncoderLayer", "layers.1-11"], ["TransformerEncoderLayer", "layers.0"]]
    assert sum(n.count for n in small.nodes if n.kind == "module") == len([n for n in vg.nodes if n.module and n.kind != "output"])
    deeper = collapse(vg, 3)
    assert "10 x TransformerEncoderLayer" in [n.label.split("\n")[0] for n in deeper.nodes]


def test_render_svg_and_png_with_the_embedded_renderer(cli, tmp_path, monkeypatch):
    import shutil

    from graphtool.render import layout

    real_which = shutil.which
    monkeypatch.setattr(layout.shutil, "which", lambda name: None if name == "dot" else real_which(name))
    found = layout.find_renderer()
    if found is None:
        pytest.skip("graphviz-pure is not installed (pip install graphviz-pure)")
    assert found[1] == "graphviz-pure"
    rc, _, err = cli("render", example("convnet_bn.py"), "-o", tmp_path / "g.png")
    assert rc == 0, err
    assert (tmp_path / "g.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    rc, _, err = cli("render", example("convnet_bn.py"), "--graph", "forward", "-o", tmp_path / "f.svg")
    svg = (tmp_path / "f.svg").read_text()
    assert rc == 0 and "<svg" in svg and "bn.running_mean" in svg
    assert "mutated (data)" in svg  # BatchNorm's buffers are highlighted
    assert "convnet_bn.py:17" in svg  # the user's line as a tooltip


def test_joint_and_backward(cli, tmp_path):
    for graph in ("backward", "joint"):
        rc, _, err = cli("render", example("mlp.py"), "--graph", graph, "-f", "dot", "-o", tmp_path / f"{graph}.dot")
        assert rc == 0, err
    joint = (tmp_path / "joint.dot").read_text()
    assert "cluster_forward" in joint and "cluster_backward" in joint
    assert "tangent of output 0" in joint


def test_cpu_nodes_and_skips_are_highlighted(cli, tmp_path):
    rc, _, _ = cli("render", example("cpu_roundtrip.py"), "--graph", "forward", "-f", "dot", "-o", tmp_path / "c.dot")
    text = (tmp_path / "c.dot").read_text()
    assert rc == 0 and "runs on cpu" in text and "cudagraphs skip: incompatible op" not in text


def test_auto_collapse_above_threshold_says_so(cli, tmp_path):
    enc = str(Path(__file__).resolve().parents[2] / "benchmarks" / "encoder12.py")
    rc, _, err = cli("render", enc, "-f", "dot", "-o", tmp_path / "e.dot")
    assert rc == 0 and "folded by module" in err
    rc, _, err = cli("render", enc, "--collapse", "none", "-f", "dot", "-o", tmp_path / "full.dot")
    assert rc == 0 and "folded" not in err


def test_no_renderer_writes_dot_and_exits_2(cli, tmp_path, monkeypatch):
    from graphtool.render import layout

    monkeypatch.setattr(layout, "find_renderer", lambda: None)
    rc, _, err = cli("render", example("mlp.py"), "-o", tmp_path / "g.svg")
    assert rc == 2 and "no Graphviz layout program" in err and "pip install graphviz-pure" in err
    assert (tmp_path / "g.dot").is_file() and not (tmp_path / "g.svg").exists()


def test_layout_timeout_leaves_nothing(cli, tmp_path, monkeypatch):
    from graphtool.render import layout

    monkeypatch.setattr(layout, "find_renderer", lambda: ("/bin/sleep", "sleep"))
    monkeypatch.setattr(layout, "PURE_FORMATS", ("svg", "png", "pdf"))
    import subprocess

    real = subprocess.run
    monkeypatch.setattr(layout.subprocess, "run", lambda cmd, **kw: real(["/bin/sleep", "5"], **{**kw, "input": None, "text": True}))
    rc, _, err = cli("render", example("mlp.py"), "-o", tmp_path / "g.svg", "--timeout", "0.5")
    assert rc == 2 and "the layout took longer than the" in err and "s left of --timeout and was stopped" in err
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("args, message", [
    (["--graph", "cfg"], "--graph 'cfg'"),
    (["--collapse", "all"], "--collapse 'all'"),
    (["--depth", "0"], "--depth must be 1 or more"),
    (["-o", "x.gif"], "format 'gif'"),
    (["--graph", "forward", "--region", "3"], "--region 3: the model has 1"),
])
def test_bad_render_options(cli, tmp_path, args, message):
    rc, _, err = cli("render", example("mlp.py"), *args)
    assert rc == 2 and message in err


def test_no_autograd_history_is_a_clear_error(cli, tmp_path):
    script = tmp_path / "f.py"
    script.write_text("import torch\nmodel = lambda x: x * 2\nexample_inputs = (torch.randn(3),)\n")
    rc, _, err = cli("render", script, "-o", tmp_path / "g.svg")
    assert rc == 2 and "no autograd history" in err and "--graph forward" in err
    assert not (tmp_path / "g.svg").exists()
