"""The memory report's judgements on hand-made records: counting storages once, grouping, names."""

from __future__ import annotations

import json
from importlib import resources
from types import SimpleNamespace

import pytest

from graphtool.analysis.graph_summary import Source
from graphtool.analysis.memory.saved import (
    Recomputed,
    build_memory_report,
    eager_side,
    group,
    module_at_depth,
    module_fqn,
    recomputed_by_line,
    symbol_source,
)
from graphtool.capture.memory.saved_tensors import EagerCapture, EagerOp, EagerSaved, Tensor

M = "/home/u/model.py"


def _saved(i, storage, kind="activation", shape=(4, 8), op="aten.relu.default", line=10, module="blocks.0.mlp",
           storage_bytes=128, name=None):
    return EagerSaved(i, shape, "float32", 4 * 8 * 4 if shape == (4, 8) else 4, storage, storage_bytes, kind, name, op,
                      (M, line), module)


def _eager(saved, checkpointed=()) -> EagerCapture:
    params = [Tensor("blocks.0.mlp.weight", (8, 8), "float32", 256, 256, True), Tensor("emb", (10, 8), "float32", 320, 320, False)]
    return EagerCapture(list(saved), list(checkpointed), params, [Tensor("bn.running_mean", (8,), "float32", 32, 32, False)],
                        "cpu", True)


EAGER = _eager([
    _saved(0, 0, kind="input", op=None, module=None, name="x"),
    _saved(1, 1),
    _saved(2, 1),  # the same storage saved again (relu's result for two ops)
    _saved(3, 2, kind="parameter", op="aten.t.default", name="blocks.0.mlp.weight", storage_bytes=256),
    _saved(4, 3, op="aten.addmm.default", line=12, module="blocks.1.attn.q", storage_bytes=512),
], [EagerOp("aten.gelu.default", (M, 20), "blocks.1")])


def test_a_storage_counts_once_whole():
    side = eager_side(EAGER)
    assert [t.counted_bytes for t in side.tensors] == [128, 128, 0, 256, 512]
    assert side.tensors[2].shares_storage_with == 1
    assert side.bytes == 128 + 128 + 256 + 512 and side.storages == 4
    assert side.tensor_bytes == 5 * 128
    assert side.by_kind == {"activation": (640, 3), "parameter": (256, 1), "buffer": (0, 0), "input": (128, 1)}


def test_groups_by_line_module_and_op():
    side = eager_side(EAGER)
    by_line = group(side, eager_side(_eager([])), "line")
    assert [(g.key, g.eager_bytes, g.eager_tensors) for g in by_line] == [(f"{M}:12", 512, 1), (f"{M}:10", 128, 2)]
    assert by_line[0].source == Source(M, 12) and by_line[0].compiled_bytes == 0
    by_module = group(side, side, "module", depth=1)
    assert [(g.key, g.eager_bytes, g.compiled_bytes) for g in by_module] == [("blocks.1", 512, 512), ("blocks.0", 128, 128)]
    by_op = group(side, side, "op")
    assert [g.key for g in by_op] == ["aten.addmm.default", "aten.relu.default"]


def test_module_names_and_depth():
    assert module_fqn("L['self'].model.layers[11].mlp") == "model.layers.11.mlp"
    assert module_fqn("getattr(getattr(L['self'].enc, 'layers'), '2')._modules['ff']") == "enc.layers.2.ff"
    assert module_fqn(None) is None
    assert module_at_depth("encoder.block.0.layer.1.DenseReluDense", 3) == "encoder.block.0.layer.1"
    assert module_at_depth("", 2) == "" and module_at_depth("a.b.c", None) == "a.b.c"
    assert symbol_source("L['x'].size()[0]") == "x.size(0)"


def test_recomputed_lines_count_views_and_keep_the_checkpoint_policy():
    ops = [Recomputed(0, "permute", "aten.permute.default", Source(M, 5), "fc", None, True),
           Recomputed(0, "mul", "aten.mul.Tensor", Source(M, 9), "blk", "PREFER_RECOMPUTE"),
           Recomputed(0, "erf", "aten.erf.default", Source(M, 9), "blk", "PREFER_RECOMPUTE")]
    assert recomputed_by_line(ops) == [(Source(M, 9), 2, 0, "PREFER_RECOMPUTE"), (Source(M, 5), 1, 1, None)]


def _no_regions(training=True):
    return SimpleNamespace(regions=[], backend="aot_eager", training=training, stopped=None)


def test_the_report_holds_parameters_gradients_and_validates():
    report = build_memory_report(EAGER, _no_regions(), by="module", depth=2)
    assert report.parameters.tensors == 2 and report.parameters.bytes == 576
    assert report.gradients.tensors == 1 and report.gradients.bytes == 256  # emb needs no grad
    assert report.buffers.bytes == 32
    assert "no compiled region has a backward graph" in report.notes
    assert [r.op for r in report.eager_recomputed] == ["aten.gelu.default"]
    assert report.verdict().startswith("activations saved for backward: eager 640 B, compiled (aot_eager) 0 B")
    import jsonschema

    schema = json.loads(resources.files("graphtool.schema").joinpath("memory.schema.json").read_text())
    doc = {"model": {"path": M, "entry": "get_model_and_inputs", "backend": "aot_eager", "device": "cpu", "training": True},
           "memory": report.to_dict()}
    jsonschema.validate(doc, schema)
    jsonschema.validate({"models": [doc, doc]}, schema)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"model": doc["model"], "memory": {**doc["memory"], "by": "file"}}, schema)


def test_by_must_be_known():
    with pytest.raises(ValueError, match="by must be one of"):
        build_memory_report(EAGER, _no_regions(), by="file")
