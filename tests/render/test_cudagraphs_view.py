"""The cudagraphs view, from hand-made Verdicts: diagnostics one per block, readable at 80 columns, a
``file:line`` never cut, paths relative to the cwd; golden at 80 and 120 columns and through a pipe.

Update the snapshots with ``python -m pytest tests/render/test_cudagraphs_view.py --snapshot-update``."""

from __future__ import annotations

import io
import re
from pathlib import Path

import pytest

from graphtool.analysis.cudagraphs.catalogue import PREFIX
from graphtool.analysis.cudagraphs.verdict import Partition, Reason, Verdict, _reason
from graphtool.analysis.graph_summary import Source
from graphtool.render.cudagraphs import cudagraphs_view
from tests.helpers.console import render_text

ROOT = Path(__file__).resolve().parents[2]
CPU = str(ROOT / "tests" / "fixtures" / "cudagraphs" / "cpu_node.py")
MUT = str(ROOT / "tests" / "fixtures" / "cudagraphs" / "mutated_input.py")
LONG = "/opt/elsewhere/a/rather/long/project/path/models/very_long_module_name_for_testing.py"
CONFIG = {"graph_partition": True, "cudagraph_trees": True, "cudagraph_support_input_mutation": True}


def split_verdict() -> Verdict:
    """reduce-overhead with partitioning: a CPU split, a silent non-Tensor skip, a run-time risk, a break."""
    reasons = (
        _reason("partition-split", "graph partition split: cpu ops at lift_fresh_copy.default", 0, "forward", False, Source(CPU, 8),
                cg="CG020", torch_message="cpu ops"),
        _reason("non-tensor-input", PREFIX + "['non-Tensor inputs']", 1, "forward", True, None, torch_message="", silent=True),
        _reason("dynamic-shape", "dynamic shapes: one CUDA graph is recorded per distinct size", 1, "forward", False),
        _reason("graph-break", "graph break: Unsupported function call (delayed)", None, None, False, Source(LONG, 1234)),
    )
    parts = (
        Partition(0, "forward", 0, 2, True, None, "sin.default", Source(CPU, 7)),
        Partition(0, "forward", 1, 4, False, "cpu ops", "lift_fresh_copy.default", Source(CPU, 8), split=True),
        Partition(0, "forward", 2, 16, True, None, "cos.default", Source(CPU, 9)),
        Partition(1, "forward", 0, 5, False, "['non-Tensor inputs']", "mul.Tensor", None),
    )
    return Verdict("inductor", False, True, 2, reasons, CONFIG, partitions=parts)


def skipped_verdict() -> Verdict:
    """The cudagraphs backend skipping on a mutated input (torch's doubled message kept verbatim)."""
    msg = PREFIX + "mutated inputs (1 instances). Found from : \n  File \"x.py\", line 7"
    reasons = (
        _reason("mutated-input", msg, 0, "forward", True, Source(MUT, 7), torch_message=PREFIX + msg),
        _reason("forward-skipped", "backward not captured: the forward of this region skipped cudagraphs", 0, "backward", True),
    )
    parts = (Partition(0, "forward", 0, 3, False, "mutated inputs (1 instances)", "add_.Tensor", Source(MUT, 7)),
             Partition(0, "backward", 0, 2, False, "backward not captured", "mul.Tensor", None))
    return Verdict("cudagraphs", False, True, 1, reasons, CONFIG, partitions=parts)


VIEWS = {"split": split_verdict, "skipped": skipped_verdict}


@pytest.fixture(autouse=True)
def _at_root(monkeypatch):
    monkeypatch.chdir(ROOT)  # paths are shown relative to the cwd


@pytest.mark.parametrize("width", [80, 120])
@pytest.mark.parametrize("view", sorted(VIEWS))
def test_golden(view, width, snapshot):
    assert render_text(cudagraphs_view(VIEWS[view]()), width) == snapshot


def test_through_a_pipe(snapshot):
    """stdout to a pipe: the console graphtool makes (no terminal) prints plain text at 80 columns."""
    from rich.console import Console

    from graphtool.render.theme import THEME

    out = io.StringIO()
    Console(theme=THEME, file=out, _environ={}).print(cudagraphs_view(split_verdict()))
    text = out.getvalue()
    assert "\x1b[" not in text
    assert text == snapshot


@pytest.mark.parametrize("view", sorted(VIEWS))
def test_readable_at_80_columns(view):
    text = render_text(cudagraphs_view(VIEWS[view]()), 80)
    lines = text.splitlines()
    assert all(len(line) <= 80 for line in lines)
    # every finding starts a line with its file:line:col (or <graph>) and its code; only a path wider than the
    # console is folded, where a terminal would fold it anyway, the rest of the head whole on the next line
    heads = [line for line in lines if re.match(r"^\S+:\d+(:\d+)?: CG\d{3}\b|^<\w+>: CG\d{3} ", line)]
    assert len(heads) == len(VIEWS[view]().reasons)
    assert "tests/fixtures/cudagraphs/" in text and str(ROOT) not in text  # relative to the cwd
    # a location longer than the console is the one case rich still folds (the console crops); at 120 it is whole
    assert view != "split" or f"{LONG}:1234: CG090" in render_text(cudagraphs_view(VIEWS[view]()), 120)


def test_the_coverage_line_and_silence():
    text = render_text(cudagraphs_view(split_verdict()), 200)
    assert "reduce-overhead would CUDA-graph 2 of 4 partitions, 67% of ops; split at tests/fixtures/cudagraphs/cpu_node.py:8 (cpu ops)" in text
    assert "silent: with graph_partition on, cudagraph_partition_post_compile disables CUDA graphs without a log line" in text
    assert " 8 |         scale = torch.tensor(2.0)" in text  # the source line under the diagnostic, in its gutter


def test_a_finding_reads_like_every_other_diagnostic():
    """Was: ``cpu_node.py:8: CG002 ...`` then ``   | scale = ...``: no column, no line number, no caret, unlike
    GT-B001 (docs/diagnostics.md promises one format)."""
    from graphtool.analysis.diagnostics import graph_break
    from graphtool.render.cudagraphs import diagnostic
    from graphtool.render.diagnostics import format_diagnostics

    r = _reason("cpu-node", "skipping cudagraphs due to cpu device (_tensor_constant0)", 0, "forward", True, Source(CPU, 8))
    lines = render_text(diagnostic(r), 200).splitlines()
    other = format_diagnostics([graph_break("Tensor.item", CPU, 8)]).splitlines()
    assert lines[0].startswith("tests/fixtures/cudagraphs/cpu_node.py:8:9: CG002 skipping cudagraphs due to cpu device")
    assert other[0].startswith("tests/fixtures/cudagraphs/cpu_node.py:8:9: GT-B001 ")
    assert lines[1:4] == other[1:4] == ["   |", " 8 |         scale = torch.tensor(2.0)", "   |         ^^^^^^^^^^^^^^^^^^^^^^^^^"]
    assert lines[4] == "   = region 0 forward" and lines[5].startswith("   = help: ")


def test_json_carries_every_field():
    d = skipped_verdict().to_dict()
    r = d["reasons"][0]
    assert set(r) >= {"code", "cg", "kind", "message", "torch_message", "silent", "region", "graph", "source", "fix"}
    assert r["torch_message"].startswith(PREFIX + PREFIX) and r["message"] == PREFIX + "mutated inputs (1 instances)"
    assert d["coverage"]["percent"] == 0 and d["partitions"][0]["reason"] == "mutated inputs (1 instances)"
    assert d["coverage_line"].startswith('backend="cudagraphs" would CUDA-graph 0 of 2 graphs')
    assert isinstance(Reason, type)


def test_a_graph_inductor_leaves_uncompiled_has_its_own_section():
    """CG037 is a note about one graph (region 1's backward), not something between regions: its own heading,
    every line within 80 columns."""
    note = _reason("uncompiled-graph", "inductor returns a graph with no ops uncompiled: nothing to CUDA-graph", 1, "backward",
                   False, silent=True)
    brk = _reason("host-sync", "graph break: Tensor.item", None, None, False)
    parts = (Partition(0, "forward", 0, 3, True, None, "addmm.default", None),)
    text = render_text(cudagraphs_view(Verdict("inductor", True, True, 2, (note, brk), CONFIG, partitions=parts)), 80)
    head = "graphs torch runs without a CUDA graph, no skip (nothing to graph):"
    assert text.index(head) < text.index("<graph>: CG037") < text.index("between regions:") < text.index("CG091")
    assert "= region 1 backward" in text and all(len(line) <= 80 for line in text.splitlines())
