"""Readable in a pipe and at 80 columns (issue 23): nothing a user needs is cut mid-word. In a pipe a
line runs long; on a terminal prose wraps between words with a hanging indent; column headers and
short values never break; paths and FQNs in table cells break only after a separator, and never
inside ``file.py:123``. Reports are hand-made (torch is never imported)."""

from __future__ import annotations

import re

import pytest

from graphtool.render.cudagraphs import cudagraphs_view
from graphtool.render.lint import lint_view
from graphtool.render.memory import memory_view
from tests.helpers.console import render_text
from tests.render import test_views as v
from tests.render.test_cudagraphs_view import ROOT, split_verdict
from tests.render.test_memory_view import memory_report
from tests.render.test_narrow import piped

SILENT = "= silent: torch logs partition reasons only at debug level (TORCH_LOGS=+cudagraphs)"
HELP = "= help: create tensors on the input's device and avoid .cpu() so the graph stays in one piece"
PARTITION = "#1: 4 ops, outside (cpu ops), from lift_fresh_copy.default at tests/fixtures/cudagraphs/cpu_node.py:8"


@pytest.fixture(autouse=True)
def _at_root(monkeypatch):
    monkeypatch.chdir(ROOT)


def _words(text: str) -> str:
    return " ".join(text.split())


def test_cudagraphs_in_a_pipe_keeps_each_line_whole():
    """Was: "= silent: ... (TORCH_LOGS=+cudag", "#1: 4 ops, ... at examples/cpu_rou" (cut at 80)."""
    lines = [ln.strip() for ln in piped(cudagraphs_view(split_verdict())).splitlines()]
    assert SILENT in lines and HELP in lines and PARTITION in lines


@pytest.mark.parametrize("width", [60, 80, 100])
def test_cudagraphs_on_a_terminal_wraps_between_words(width):
    text = render_text(cudagraphs_view(split_verdict()), width)
    for prose in (SILENT, HELP, PARTITION):
        assert _words(prose) in _words(text), prose  # a word cut at the edge would read "cudag raphs"
    for ln in text.splitlines():
        if re.match(r" {3,5}= ", ln):  # a note under the gutter (its width: the line number's)
            continue
        if ln.startswith("     ") and ln.strip():  # a continuation hangs under the text it continues
            assert not ln.strip().startswith("=")


def split_after(text: str, chars: str) -> list[str]:
    return re.findall(f"[^{re.escape(chars)}]*[{re.escape(chars)}]|[^{re.escape(chars)}]+$", text)


def _pieces(path: str) -> list[str]:
    """A path as the pieces it may be broken into: after each ``/``, the file name and line whole."""
    return split_after(path, "/")


LOCATIONS = ["transformers/integrations/sdpa_attention.py:96", "transformers/models/llama/modeling_llama.py:154",
             "transformers/models/llama/modeling_llama.py:65"]
FQNS = ["model.layers.0.self_attn", "model.layers.0.input_layernorm"]


@pytest.mark.parametrize("width", [80, 100, 120, 140])
def test_memory_cells_break_only_after_a_separator(width):
    """Was: "transformers/integrations/sd" | "pa_attention.py:96", "model.layers.0.input_layern" | "orm"."""
    text = render_text(memory_view(memory_report()), width).split("largest saved activations", 1)[1]  # the widest table
    for loc in LOCATIONS:
        for piece in _pieces(loc):
            assert piece in text, (loc, piece)
    for fqn in FQNS:
        for piece in split_after(fqn, "."):
            assert re.search(re.escape(piece) + r"(\s|$)|" + re.escape(piece) + r"[a-z0-9_]", text), (fqn, piece)
        assert fqn in text or fqn.rsplit(".", 1)[-1] in text


def test_largest_saved_activations_are_in_order_of_the_size_shown():
    """Was: a view counted in another tensor's storage (8.0 MiB shown, 0 counted) after a 2.0 MiB row."""
    text = render_text(memory_view(memory_report()), 200)
    table = text.split("largest saved activations, eager", 1)[1].split("largest saved activations", 1)[0]
    sizes = re.findall(r"(\d+\.\d) (KiB|MiB) │", table)
    shown = [float(n) * (1024 if unit == "MiB" else 1) for n, unit in sizes]
    assert len(shown) >= 4 and shown == sorted(shown, reverse=True)


@pytest.mark.parametrize("width", range(56, 121, 4))
def test_lint_headers_and_statuses_never_break(width):
    """Was, at 80 columns: "recompile" | "s" and "over" | "budget" on two lines."""
    text = render_text(lint_view(v.LINT_FAILED), width)
    assert "over budget" in text
    if "- model: examples/graph_breaks.py" in text:  # too narrow for the table: one row a block, whole
        assert "  status: over budget" in text and "  recompiles: 0" in text
        return
    header = next(ln for ln in text.splitlines() if "model" in ln and "status" in ln)
    shown = re.findall(r"[a-z]+", header)
    note = next((ln for ln in text.splitlines() if "not shown" in ln), "")
    for name in ("graphs", "breaks", "recompiles", "skipped", "seconds"):
        assert name in shown or name in note, (width, header, note)
    assert not re.search(r"┃ (recompile|skippe|second|graph|break) ", header)


def test_an_error_wraps_between_words_on_a_terminal():
    from graphtool.cli.main import _wrapped

    hint = "hint: the model's parameters are on meta and its example inputs on cpu: build both on one device"
    lines = _wrapped(hint, 30, "      ").splitlines()
    assert all(len(ln) <= 30 for ln in lines) and lines[1].startswith("      ")
    assert _words(" ".join(lines)) == hint  # was: "the model'" | "s device" (the terminal cut it)
    assert _wrapped(hint, 0, "  ") == hint  # a pipe keeps it whole
    long_path = "graphtool: error: /a/very/long/path/that/is/wider/than/the/console/model.py:12: bad"
    assert any("/a/very/long/path/that/is/wider/than/the/console/model.py:12:" in ln
               for ln in _wrapped(long_path, 30, "    ").splitlines())
