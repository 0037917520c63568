"""Pictures that lay out fast and read well (issue 17): properties of the Drawing and its DOT text.

Structure, not pixels: outputs as local markers, modules as nested clusters, folds labelled by
range, --depth as module depth, backward graphs not one row of saved tensors, constants inside
their clusters, recomputed nodes and CUDA-graph skips marked. Each is checked against what torch
itself says where it can be (the traced graph's outputs, the partitioner's tags).
"""

from __future__ import annotations

import functools
import re
import subprocess
from pathlib import Path

import pytest
import torch
from torch import nn

from graphtool.analysis.drawing import autograd_drawing, collapse, fx_drawing
from graphtool.capture import compat
from graphtool.capture.autograd_graph import capture_autograd
from graphtool.capture.user.script import ModelSpec, load_model
from graphtool.render.dot import to_dot
from tests.helpers import FIXTURES, ROOT, example, standin_traced

RESNET = str(ROOT / "benchmarks" / "resnet_small.py")
CHECKPOINTED = str(FIXTURES / "memory" / "checkpointed.py")


# -- a small DOT reader: which clusters each node sits in -------------------------------------

_NODE = re.compile(r'^\t+("?[A-Za-z0-9_.]+"?) \[')
_SUBGRAPH = re.compile(r'^\t+subgraph "?(cluster[^" ]*)"? \{')
_EDGE = re.compile(r'^\t+("?[A-Za-z0-9_.]+"?) -> ("?[A-Za-z0-9_.]+"?)')


def read_dot(text: str):
    """``({node: [cluster label, ... outermost first]}, [(src, dst)], {cluster label: parent label})``."""
    where: dict[str, list[str]] = {}
    edges, parents = [], {}
    stack: list[str] = []
    pending = False
    for line in text.splitlines():
        if m := _SUBGRAPH.match(line):
            stack.append(m.group(1))
            pending = True
            continue
        if pending and "label=" in line:
            label = re.search(r'label=("[^"]*"|\S+)', line).group(1).strip('"')
            parents[label] = stack[-2] if len(stack) > 1 else None
            stack[-1] = label
            pending = False
            continue
        if re.match(r"^\t+\}$", line):
            stack.pop()
            continue
        if m := _EDGE.match(line):
            edges.append((m.group(1).strip('"'), m.group(2).strip('"')))
        elif m := _NODE.match(line):
            where[m.group(1).strip('"')] = list(stack)
    return where, edges, parents


def acyclic(nodes, edges) -> bool:
    indeg = {n: 0 for n in nodes}
    out: dict = {}
    for s, d in edges:
        indeg[d] = indeg.get(d, 0) + 1
        out.setdefault(s, []).append(d)
    todo = [n for n, k in indeg.items() if k == 0]
    seen = 0
    while todo:
        n = todo.pop()
        seen += 1
        for d in out.get(n, ()):
            indeg[d] -= 1
            if indeg[d] == 0:
                todo.append(d)
    return seen == len(indeg)


# -- models ------------------------------------------------------------------------------------


class Block(nn.Module):
    """A parent with its own ops (the residual adds) and children: the case that used to draw
    ``Block blocks.0`` beside its own ``ln2`` and make cycles."""

    def __init__(self, d=8):
        super().__init__()
        self.ln1, self.fc, self.ln2 = nn.LayerNorm(d), nn.Linear(d, d), nn.LayerNorm(d)
        self.mlp = nn.Sequential(nn.Linear(d, 2 * d), nn.GELU(), nn.Linear(2 * d, d))

    def forward(self, x):
        x = x + self.fc(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class Net(nn.Module):
    def __init__(self, layers=4, d=8):
        super().__init__()
        self.blocks = nn.ModuleList([Block(d) for _ in range(layers)])
        self.head = nn.Linear(d, 2)

    def forward(self, x):
        for b in self.blocks:
            x = b(x)
        return self.head(x)


@functools.cache
def net_drawing(layers=4):
    torch.manual_seed(0)
    spec = ModelSpec(Path("net.py"), "model", Net(layers), (torch.randn(3, 8, requires_grad=True),))
    return autograd_drawing(capture_autograd(spec))


@functools.cache
def fx_picture(script: str, kind: str):
    from graphtool.commands.render import drawing

    return drawing(script, graph=kind, collapse="none")


def statement(text: str, node_id: str) -> str:
    """A node's whole statement in DOT text (labels span lines)."""
    return re.search(rf"\t{re.escape(node_id)} \[(.*?)\]\n", text, re.S).group(1)


def boxes(picture):
    return {n.id: n.label.split("\n") for n in picture.nodes if n.kind == "module"}


# -- outputs, saved tensors and gradients stay local ------------------------------------------


def test_every_output_of_the_traced_forward_is_one_marker_beside_its_producer():
    capture = standin_traced("convnet_bn.py")
    region = capture.regions[0]
    gm = region.forward
    out = next(iter(gm.graph.find_nodes(op="output")))
    producers = {v.name for v in out.args[0] if hasattr(v, "name")}  # torch's own list of what the forward returns
    picture = fx_drawing(gm, "forward", region, classes={n: type(m).__name__ for n, m in capture.spec.model.named_modules()})
    where, edges, _ = read_dot(to_dot(picture))
    markers = {n for n in where if n.endswith("__out")}
    assert {m[: -len("__out")] for m in markers} == producers
    assert "output" not in where  # no global "forward outputs" sink
    into = {}
    for s, d in edges:
        into.setdefault(d, []).append(s)
    for m in markers:
        assert into[m] == [m[: -len("__out")]]  # one edge, from its own producer
        assert where[m] == where[into[m][0]]  # in the producer's cluster
        assert not any(s == m for s, _ in edges)  # a marker leads nowhere


def test_backward_gradients_are_markers_named_by_parameter():
    picture = fx_picture(example("mlp.py"), "backward")
    grads = [n for n in picture.nodes if n.kind == "output"]
    named = sorted(d for n in grads for r, d in n.roles if r == "gradient")
    assert named == ["fc1.bias", "fc1.weight", "fc2.bias", "fc2.weight"]
    assert all(len(n.roles) == 1 for n in grads)


# -- modules nest, folds are labelled by range, --depth is module depth ------------------------


def test_collapsed_parents_are_clusters_around_their_children_never_beside_them():
    g = net_drawing()
    for depth in (1, 2, 3, 4):
        small = collapse(g, depth)
        text = to_dot(small)
        where, edges, parents = read_dot(text)
        assert acyclic(where, edges), f"depth {depth}: the folded picture has a cycle"
        fqns = {n.id: n.label.split("\n")[1] for n in small.nodes if n.kind == "module"}
        for bid, fqn in fqns.items():
            first = fqn.split("-")[0]
            # no box is an ancestor module of another box
            assert not any(o != bid and other.startswith(first + ".") for o, other in fqns.items()), (depth, fqn)
        for n in small.nodes:
            # every node sits inside one cluster per ancestor module, outermost first
            assert [label.split(" ")[-1] for label in where[n.id]] == [f for f, _ in n.module], (depth, n.label)
            if n.kind == "module":
                assert all(fqns[n.id].startswith(f + ".") for f, _ in n.module)


def test_identical_blocks_fold_into_one_box_labelled_by_range():
    g = net_drawing(4)
    whole = boxes(collapse(g, 2))
    run = [label for label in whole.values() if " x Block" in label[0]]
    assert run, whole
    for label in run:
        n = int(label[0].split(" x ")[0])
        first, last = re.fullmatch(r"blocks\.(\d+)-(\d+)", label[1]).groups()
        assert n == int(last) - int(first) + 1 and n > 1
    assert not any(label[0].startswith("1 x") for label in whole.values())
    # depth 1: the ModuleList whose children are all one run reads as that run
    top = boxes(collapse(g, 1))
    if sum(1 for label in run) == 1 and run[0][1] == "blocks.0-3":
        assert ["4 x Block", "blocks.0-3"] in [label[:2] for label in top.values()]
    # deeper: the first block expands, the rest stay one box
    deeper = boxes(collapse(g, 3))
    assert any(re.fullmatch(r"\d+ x Block", label[0]) and label[1].endswith("-3") for label in deeper.values())


def test_two_identical_blocks_never_read_one_x():
    for depth in (1, 2, 3):
        labels = [label[0] for label in boxes(collapse(net_drawing(2), depth)).values()]
        assert not any(label.startswith("1 x") for label in labels), labels


@functools.cache
def _resnet():
    return autograd_drawing(capture_autograd(load_model(RESNET)))


@pytest.mark.parametrize("depth", [1, 2, 3])
def test_depth_n_folds_at_module_depth_n(depth):
    g = _resnet()
    small = collapse(g, depth)
    parents = {fqn for n in g.nodes for fqn, _ in n.module[:-1]}
    for n in small.nodes:
        if n.kind != "module":
            continue
        fqn = n.label.split("\n")[1]
        if len(n.module) == depth - 1:
            # the module at depth N, or a ModuleList/Sequential of identical blocks read as their run
            assert fqn.count(".") + 1 == depth or re.fullmatch(r"[\w.]+\.\d+-\d+", fqn) and fqn.count(".") == depth, fqn
        else:  # shallower: only a module with no children (fc at depth 2 is still one box)
            assert len(n.module) < depth - 1 or fqn.count(".") + 1 < depth
            assert fqn not in parents and fqn.count(".") + 1 < depth, fqn
    fqns = [label[1] for label in boxes(small).values()]
    assert fqns
    if depth == 1:
        assert "layer2" in fqns and not any(f.startswith("layer2.") for f in fqns)


def test_cli_depth_1_shows_no_block_inside_a_stage(cli, tmp_path):
    rc, _, err = cli("render", RESNET, "--collapse", "module", "--depth", "1", "-f", "dot", "-o", tmp_path / "r.dot")
    assert rc == 0, err
    text = (tmp_path / "r.dot").read_text()
    assert "layer2" in text and "layer2.0" not in text
    rc, out, _ = cli("render", "--help")
    assert "module depth" in out


# -- backward graphs read like forward ones ---------------------------------------------------


def _bounding_box(text: str) -> tuple[float, float]:
    from graphtool.render.layout import find_renderer

    found = find_renderer()
    if found is None:
        pytest.skip("no Graphviz layout program")
    laid = subprocess.run([found[0], "-Tdot"], input=text, text=True, capture_output=True, check=True, timeout=60).stdout
    x0, y0, x1, y1 = map(float, re.search(r'bb="([^"]+)"', laid).group(1).split(","))
    return x1 - x0, y1 - y0


def test_collapsed_backward_keeps_saved_tensors_with_their_modules():
    capture = standin_traced("transformer.py")
    region = capture.regions[0]
    classes = {n: type(m).__name__ for n, m in capture.spec.model.named_modules()}
    picture = fx_drawing(region.backward, "backward", region, classes=classes)
    saved = [n for n in picture.nodes if n.kind == "saved"]
    assert saved
    # a saved tensor whose consumers share a module is drawn (and folded) in that module
    assert sum(1 for n in saved if n.module) >= len(saved) * 0.8
    small = collapse(picture, 1)
    loose = [n for n in small.nodes if n.kind == "saved"]
    assert len(loose) <= 3, [n.label for n in loose]
    into = [s for s, d in small.edges if d.endswith("__out")]
    assert len(into) == len(set(into))  # one marker per box: its gradients merged
    grads = [d for n in small.nodes for r, d in n.roles if r == "gradient"]
    assert sorted(grads) == sorted(d for n in picture.nodes for r, d in n.roles if r == "gradient")
    width, height = _bounding_box(to_dot(small, legend=False))
    assert width < 4 * height, (width, height)  # not one long row of saved-tensor boxes


# -- constants, fonts, marks ------------------------------------------------------------------


CONSTANTS = """
import torch
from torch import nn


class Scale(nn.Module):
    def forward(self, x):
        return x * torch.tensor([2.0, 3.0], device=x.device) + torch.ones(2, device=x.device)


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(2, 2)
        self.scale = Scale()

    def forward(self, x):
        return self.scale(self.fc(x))


def get_model_and_inputs():
    return Net(), (torch.randn(3, 2),)
"""


def test_constants_sit_in_their_module_cluster_in_the_same_font(tmp_path):
    from graphtool.commands.render import drawing

    script = tmp_path / "constants.py"
    script.write_text(CONSTANTS)
    picture = drawing(str(script), graph="forward", collapse="none")
    has_input = {d for _, d in picture.edges}
    sources = [n for n in picture.nodes if n.id not in has_input and n.kind not in ("user_input", "tangent", "output", "parameter")]
    assert sources, "the constants vanished from the graph: the test no longer tests anything"
    assert all(n.module and n.module[-1][0] == "scale" for n in sources), [(n.label, n.module) for n in sources]
    text = to_dot(picture)
    assert set(re.findall(r"fontname=(\S+)", text)) == {"Helvetica"}  # one font, set for the whole graph
    assert not any("fontname" in statement(text, n.id) for n in picture.nodes)
    where, _, _ = read_dot(text)
    assert all(where[n.id] == ["Scale scale"] for n in sources)
    folded = collapse(picture, 1)
    assert not [n for n in folded.nodes if n.id in {s.id for s in sources}]  # folded into the scale box


def test_recomputed_nodes_are_marked_as_torch_tags_them():
    from graphtool.commands.session import Session

    capture = Session(str(CHECKPOINTED)).standin_trace("inductor", steps=1)[0]
    region = capture.regions[0]
    classes = {n: type(m).__name__ for n, m in capture.spec.model.named_modules()}
    bw = fx_drawing(region.backward, "backward", region, classes=classes)
    tagged = {n.name for n in region.backward.graph.nodes if n.op == "call_function" and compat.partitioner_tag(n) == "is_forward"}
    assert tagged, "the partitioner recomputes nothing here: the fixture no longer exercises checkpointing"
    assert {n.id for n in bw.nodes if n.mark == "recomputed"} == tagged
    text = to_dot(bw)
    for name in tagged:
        line = statement(text, name)
        assert 'color="#3c78d8"' in line and "dashed" in line
    assert "recomputed in backward (checkpoint)" in text  # the legend says what blue dashed means
    folded = collapse(bw, 2)
    assert any(re.search(r"\n\d+ recomputed", n.label) for n in folded.nodes if n.kind == "module")
    fw = fx_drawing(region.forward, "forward", region, classes=classes)
    policy = {n.name for n in region.forward.graph.nodes if n.op == "call_function" and compat.checkpoint_policy(n)}
    assert {n.id for n in fw.nodes if n.mark == "recomputed"} == policy


def test_cudagraph_skips_and_other_devices_are_drawn_not_only_tooltips():
    capture = standin_traced("mlp.py")
    region = capture.regions[0]
    gm = region.forward
    relu = next(n.name for n in gm.graph.nodes if n.op == "call_function" and "addmm" in str(n.target))  # inside fc1
    picture = fx_drawing(gm, "forward", region, highlights={relu: "cudagraphs skip: incompatible op"})
    text = to_dot(picture)
    line = statement(text, relu)
    assert "shape=octagon" in line and 'color="#cc0000"' in line
    assert "[cudagraphs skip: incompatible op]" in line
    assert "the op that makes CUDA graphs skip" in text
    folded = collapse(picture, 1)
    box = next(n for n in folded.nodes if n.kind == "module" and n.mark == "cudagraph_skip")
    assert "[cudagraphs skip: incompatible op]" in statement(to_dot(folded), box.id)

    cpu = fx_picture(example("cpu_roundtrip.py"), "forward")
    text = to_dot(cpu)
    assert any(n.mark == "device" for n in cpu.nodes)
    assert 'color="#8e24aa"' in text and "runs on another device" in text


def test_to_dot_keeps_its_public_signature():
    g = net_drawing(2)
    assert to_dot(g) == to_dot(g, legend=True)
    assert "cluster_legend" not in to_dot(g, legend=False)
    flat = to_dot(g, modules=False)
    assert "cluster_" not in flat.replace("cluster_legend", "")


def test_joint_picture_draws_saved_tensors_as_edges_not_markers():
    from graphtool.analysis.drawing import joint_drawing

    capture = standin_traced("mlp.py")
    region = capture.regions[0]
    fw = fx_drawing(region.forward, "forward", region, prefix="fw_", cluster="forward")
    bw = fx_drawing(region.backward, "backward", region, prefix="bw_", cluster="backward")
    joint = joint_drawing(fw, bw)
    assert any(r == "saved" for n in fw.nodes for r, _ in n.roles)
    assert not any(r == "saved" for n in joint.nodes for r, _ in n.roles)
    ids = {n.id for n in joint.nodes}
    assert all(s in ids and d in ids for s, d in joint.edges)
    cluster = {n.id: n.cluster for n in joint.nodes}
    crossing = [(s, d) for s, d in joint.edges if cluster[s] == "forward" and cluster[d] == "backward"]
    saved = {n.name for n in region.backward.graph.nodes if n.op == "placeholder" and not n.name.startswith("tangents")}
    assert {s[len("fw_"):] for s, _ in crossing} == saved  # every saved tensor: an edge from forward to backward
    text = to_dot(joint)
    where, _, _ = read_dot(text)
    assert all(where[n.id][0] == n.cluster for n in joint.nodes)
    # the crossing edges are drawn but do not stretch both halves' ranks (the joint layout's cost)
    for s, d in crossing:
        assert re.search(rf"\t{s} -> {d} \[[^\]]*constraint=false", text), (s, d)
    assert "saves for the backward" in text


@pytest.mark.parametrize("depth", [None, 1])
def test_joint_tangent_sits_with_the_ops_that_use_it(depth):
    """Was: the tangent the only node directly in ``cluster_backward`` (every backward op sits in a module
    cluster), a "backward" box that seemed to hold the tangent alone. convnet_bn's output is fc's: its
    gradient goes into fc's backward ops, so the tangent is drawn in fc's cluster (folded: beside fc's box)."""
    from graphtool.analysis.drawing import joint_drawing

    region = standin_traced("convnet_bn.py").regions[0]
    classes = {"conv": "Conv2d", "bn": "BatchNorm2d", "fc": "Linear"}
    fw = fx_drawing(region.forward, "forward", region, prefix="fw_", cluster="forward", classes=classes)
    bw = fx_drawing(region.backward, "backward", region, prefix="bw_", cluster="backward", classes=classes)
    joint = joint_drawing(fw, bw)
    if depth:
        joint = collapse(joint, depth)
    where, _, _ = read_dot(to_dot(joint))
    tangents = [n.id for n in joint.nodes if n.kind == "tangent"]
    assert tangents
    for t in tangents:
        assert where[t] == (["backward"] if depth else ["backward", "Linear fc"]), where[t]
    # the backward cluster holds more than a tangent: an op or another cluster directly
    assert depth or any(c[:2] == ["backward", "Linear fc"] and n not in tangents for n, c in where.items())


def test_mutated_buffers_are_written_back_inside_their_module():
    capture = standin_traced("convnet_bn.py")
    region = capture.regions[0]
    gm = region.forward
    copies = {n.name for n in gm.graph.nodes if n.op == "call_function" and "copy_" in str(n.target)}
    assert copies, "AOT no longer writes BatchNorm's buffers back in the graph: the test tests nothing"
    classes = {n: type(m).__name__ for n, m in capture.spec.model.named_modules()}
    from graphtool.analysis.drawing import fx_highlights

    picture = fx_drawing(gm, "forward", region, classes=classes, highlights=fx_highlights(region, "forward"))
    placed = {n.id: n.module for n in picture.nodes if n.id in copies}
    assert placed and all(m and m[-1][0] == "bn" for m in placed.values()), placed
    marks = {n.label.split(chr(10))[0]: n.mark for n in picture.nodes if n.kind == "buffer"}
    assert marks and all(m == "mutated" for m in marks.values()), marks


@pytest.mark.parametrize("reentrant", [False, True])
def test_autograd_graph_marks_what_checkpoint_recomputes(reentrant):
    import runpy

    from torch.utils.checkpoint import checkpoint

    ns = runpy.run_path(CHECKPOINTED)
    model, (x,) = ns["get_model_and_inputs"]()

    class Wrapped(nn.Module):
        def __init__(self):
            super().__init__()
            self.net = model

        def forward(self, x):
            for block in self.net.blocks:
                x = checkpoint(block, x, use_reentrant=reentrant)
            return self.net.head(torch.tanh(x))

    g = autograd_drawing(capture_autograd(ModelSpec(Path("w.py"), "model", Wrapped(), (x,))))
    marked = [n for n in g.nodes if n.mark == "recomputed"]
    assert marked
    if reentrant:  # torch's own node for a reentrant checkpoint: the block's ops are not in the graph
        assert {n.label for n in marked} == {"CheckpointFunctionBackward"} and len(marked) == 2
    else:
        in_blocks = lambda n: any(f.startswith("net.blocks.") for f, _ in n.module)  # noqa: E731
        assert all(in_blocks(n) for n in marked)
        ops = [n for n in g.nodes if n.kind == "op" and in_blocks(n)]
        assert len(marked) == len(ops)
    assert not any(n.mark for n in g.nodes if n.module and n.module[-1][0] == "net.head")
    text = to_dot(g)
    assert all('color="#3c78d8"' in statement(text, n.id) for n in marked)
