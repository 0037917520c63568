"""``graphtool memory``'s view and documents, compared exactly with a syrupy snapshot (80 and 120 columns).

The report is built by hand (no model is traced, torch is never imported): a two-layer Llama from
transformers with one checkpointed layer, traced with --dynamic. Accept intended changes with
``python -m pytest tests/render/test_memory_view.py --snapshot-update``.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from graphtool.analysis.graph_summary import Source
from graphtool.analysis.memory.saved import (
    Held,
    MemoryReport,
    Recomputed,
    RegionTotal,
    SavedTensor,
    group,
    side_of,
)
from graphtool.render.documents import format_json, format_yaml
from graphtool.render.memory import memory_view
from tests.helpers.console import render_text

ROOT = Path(__file__).resolve().parents[2]
LLAMA = "/home/dev/proj/.venv/lib/python3.12/site-packages/transformers/models/llama/modeling_llama.py"
SDPA = "/home/dev/proj/.venv/lib/python3.12/site-packages/transformers/integrations/sdpa_attention.py"
TRAIN = "train_llama.py"
WIDTHS = (80, 120)


def _t(index, name, kind, shape, nbytes, storage, counted, op, source, module, *, of=None, shares=None, region=0,
       checkpoint=False, formula=None):
    return SavedTensor(index, name, region, kind, of, shape, "bfloat16", nbytes, storage, counted, shares, op, source,
                       module, checkpoint, formula)


def _eager():
    return side_of("eager", [
        _t(0, "#0", "input", (2, 512), 2048, 0, 2048, None, None, None, of="input_ids", region=None),
        _t(1, "#1", "parameter", (4096, 1024), 8388608, 1, 8388608, "aten.t.default", Source(LLAMA, 164),
           "model.layers.0.self_attn.q_proj", of="model.layers.0.self_attn.q_proj.weight", region=None),
        _t(2, "#2", "activation", (2, 512, 1024), 2097152, 2, 2097152, "aten.mul.Tensor", Source(LLAMA, 65),
           "model.layers.0.input_layernorm", region=None),
        _t(3, "#3", "activation", (2, 16, 512, 512), 16777216, 3, 16777216, "aten._safe_softmax.default", Source(SDPA, 96),
           "model.layers.0.self_attn", region=None),
        _t(4, "#4", "activation", (2, 512, 4096), 8388608, 4, 8388608, "aten.silu.default", Source(LLAMA, 154),
           "model.layers.1.mlp", region=None),
        _t(5, "#5", "activation", (2, 512, 4096), 8388608, 4, 0, "aten.silu.default", Source(LLAMA, 154),
           "model.layers.1.mlp", shares=4, region=None),
    ])


def _compiled():
    return side_of("compiled", [
        _t(0, "primals_1", "input", (2, "s0"), 2048, 0, 2048, None, None, None, of="input_ids", formula="4*s0"),
        _t(1, "primals_5", "parameter", (4096, 1024), 8388608, 1, 8388608, None, None, None,
           of="model.layers.0.self_attn.q_proj.weight"),
        _t(2, "rsqrt", "activation", (2, "s0", 1), 2048, 2, 2048, "aten.rsqrt.default", Source(LLAMA, 64),
           "model.layers.0.input_layernorm", formula="4*s0"),
        _t(3, "where_1", "activation", (2, 16, "s0", "s0"), 16777216, 3, 16777216, "aten.where.self", Source(SDPA, 96),
           "model.layers.0.self_attn", formula="64*s0**2"),
        _t(4, "add_3", "activation", (2, "s0", 1024), 2097152, 4, 2097152, "aten.add.Tensor", Source(TRAIN, 31), "",
           checkpoint=True, region=1, formula="4096*s0"),
    ], formula="4*s0*(16*s0 + 1025)")


def memory_report() -> MemoryReport:
    eager, compiled = _eager(), _compiled()
    recomputed = (
        Recomputed(0, "permute_3", "aten.permute.default", Source(LLAMA, 164), "model.layers.0.self_attn.q_proj", None, True),
        Recomputed(0, "mul_4", "aten.mul.Tensor", Source(LLAMA, 65), "model.layers.0.input_layernorm", None),
        Recomputed(1, "mm_7", "aten.mm.default", Source(LLAMA, 154), "model.layers.1.mlp", "PREFER_RECOMPUTE"),
        Recomputed(1, "silu", "aten.silu.default", Source(LLAMA, 154), "model.layers.1.mlp", "PREFER_RECOMPUTE"),
    )
    return MemoryReport(
        backend="inductor", device="meta", training=True,
        parameters=Held(20, 268435456), gradients=Held(20, 268435456), buffers=Held(1, 128),
        eager=eager, compiled=compiled,
        regions=(RegionTotal(0, 4, 25169920, 16779264, 2), RegionTotal(1, 1, 2097152, 2097152, 2)),
        recomputed=recomputed,
        eager_recomputed=(Recomputed(None, None, "aten.mm.default", Source(LLAMA, 154), "model.layers.1.mlp", "checkpoint"),),
        by="module", depth=3, groups=group(eager, compiled, "module", 3), top_lines=group(eager, compiled, "line")[:10],
        symbols={"s0": "input_ids.size(1)"},
        notes=("--dynamic: symbolic sizes for input_ids.size(1); bytes at the example inputs' sizes",),
    )


def memory_inference() -> MemoryReport:
    empty = side_of("eager", [])
    return MemoryReport(backend="aot_eager", device="cpu", training=False, parameters=Held(4, 10816),
                        gradients=Held(0, 0), buffers=Held(0, 0), eager=empty, compiled=side_of("compiled", []),
                        regions=(), recomputed=(), eager_recomputed=(), by="line", depth=None, groups=(), top_lines=())


VIEWS = {
    "training": lambda: memory_view(memory_report(), top=3),
    "inference": lambda: memory_view(memory_inference()),
}


@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("view", list(VIEWS))
def test_memory_view_text(view, width, snapshot):
    assert render_text(VIEWS[view](), width) == snapshot


def test_memory_view_colours(snapshot):
    assert render_text(VIEWS["training"](), 120, color=True) == snapshot


@pytest.mark.parametrize("fmt", [format_json, format_yaml], ids=["json", "yaml"])
def test_memory_documents(fmt, snapshot):
    assert fmt(memory_report().to_dict()) == snapshot


def test_a_narrow_table_keeps_the_column_that_tells_rows_apart():
    """Six projections saved at one line of one file: a console too narrow for both keeps their modules."""
    from dataclasses import replace

    from graphtool.render.memory import _tensors_table

    modules = [f"model.layers.{i // 3}.mlp.{p}_proj" for i, p in enumerate(["gate", "up", "down"] * 2)]
    side = side_of("compiled", [
        _t(i, f"_unsafe_view_{i}", "activation", (1, 4, "s0", 64), 2048, i, 2048, "aten._unsafe_view.default",
           Source(LLAMA, 164), m, formula="256*s0")
        for i, m in enumerate(modules)
    ])
    text = render_text(_tensors_table(side, "largest saved activations", 10, region=False), 90)
    assert "where not shown" in text and "modeling_llama.py:164" not in text
    assert all(m.rpartition(".")[2] in text for m in modules)
    one = _tensors_table(replace(side, tensors=side.tensors[:1]), "one", 10, region=False)  # nothing to tell apart
    assert "module not shown" in render_text(one, 90)


def test_the_size_symbols_are_named_next_to_the_formula():
    text = render_text(VIEWS["training"](), 120)
    assert text.index("s0 = input_ids.size(1)") < text.index("activations by module")


def test_the_memory_snapshots_need_no_torch():
    code = (
        "import sys\n"
        "from tests.render import test_memory_view as t\n"
        "[t.render_text(view(), 80) for view in t.VIEWS.values()]\n"
        "t.format_yaml(t.memory_report().to_dict())\n"
        "assert 'torch' not in sys.modules, 'torch was imported'\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
