"""Folding a run of identical blocks into one box, on hand-built drawings (no torch)."""

from __future__ import annotations

from graphtool.analysis.drawing import Drawing, DrawNode, collapse_with_members


def _backward_of_residual_blocks(n: int) -> Drawing:
    """The backward of ``x = x + block(x)`` n times: the gradient runs through each block's ops and, beside
    them, through a chain of sums autograd adds for the residuals, which carry no forward module (they sit in
    the blocks' container, as ``_adopt_sources`` places them)."""
    container = (("blocks", "ModuleList"),)
    nodes = [DrawNode("tangent", "tangent", "tangent", "tangent")]
    edges = []
    grad = "tangent"
    for i in reversed(range(n)):
        block = (*container, (f"blocks.{i}", "Block"))
        a, b = f"mm_{i}", f"relu_{i}"
        nodes += [DrawNode(a, "mm", "op", "mm", (*block, (f"blocks.{i}.fc", "Linear"))),
                  DrawNode(b, "relu", "op", "relu", (*block, (f"blocks.{i}.act", "ReLU"))),
                  DrawNode(f"sum_{i}", "add", "op", "add", container)]
        edges += [(grad, a), (a, b), (b, f"sum_{i}"), (grad, f"sum_{i}")]
        grad = f"sum_{i}"
    nodes.append(DrawNode("out", "output 0", "output", "output"))
    edges.append((grad, "out"))
    return Drawing("backward graph", tuple(nodes), tuple(edges))


def _acyclic(d: Drawing) -> bool:
    indegree = {n.id: 0 for n in d.nodes}
    for _, dst in d.edges:
        indegree[dst] += 1
    ready = [n for n, k in indegree.items() if k == 0]
    seen = 0
    while ready:
        node = ready.pop()
        seen += 1
        for src, dst in d.edges:
            if src == node:
                indegree[dst] -= 1
                if indegree[dst] == 0:
                    ready.append(dst)
    return seen == len(d.nodes)


def test_the_sums_between_a_runs_blocks_fold_into_the_run_so_the_picture_has_no_cycle():
    # a 50-block model's backward at depth 2: the run box went box -> sum -> box through 150 sums, and Graphviz
    # (graphviz-pure) took over 300 s on that 155-node picture; the report gave up on it after 30 s
    drawing = _backward_of_residual_blocks(6)
    for depth in (2, 3):
        folded, members = collapse_with_members(drawing, depth)
        assert _acyclic(folded), depth
        runs = [n for n in folded.nodes if n.kind == "module" and " x Block" in n.label]
        assert len(runs) == 1, [n.label for n in folded.nodes]
        loose_sums = [n.id for n in folded.nodes if n.id.startswith("sum_")]
        assert all(members.get(s) == runs[0].id for s in members if s.startswith("sum_") and s not in loose_sums)
        # every node is drawn once: in a box or loose
        drawn = sum(n.count for n in folded.nodes if n.kind == "module") + sum(1 for n in folded.nodes if n.kind != "module")
        assert drawn == len(drawing.nodes) + sum(1 for n in folded.nodes if n.id.endswith("__out"))
    folded, _ = collapse_with_members(drawing, 2)
    assert [n.label.split("\n")[:2] for n in folded.nodes if n.kind == "module"] == [["6 x Block", "blocks.0-5"]]
    # the sums between the run's first and last block are in its box; the last one, after block 0, is not
    assert [n.id for n in folded.nodes if n.id.startswith("sum_")] == ["sum_0"]
