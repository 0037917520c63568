"""The cases of tests/truth/gpu/shapes_truth.py as graphtool predicts them on the meta stand-in, once per
process (functools.cache): the GPU rows' test and the CPU truth test share them."""

from __future__ import annotations

import functools
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures" / "shapes"
#: the input dimension that changes in each model's schedule, as shapes_truth.py marks it
MARKS = {"decoder_train": ("input_ids:1",), "decoder_infer": ("input_ids:1",), "cnn_last_batch": ("input:0",),
         "kv_decode": ("k_cache:1", "v_cache:1")}
INFERENCE = {"decoder_infer", "kv_decode"}
#: on the pinned torch only (``one_torch``, docs/ci.md): the decoder's variants that repeat a rule the CNN, the KV
#: decode and the decoder's other variants check on every torch (automatic dynamic in training, the recompile limit,
#: mark_dynamic, the cudagraphs backend), each 15-75 s of a real loop and a prediction on 2 cores
ONE_TORCH = {("decoder_train", "dynamic_false"), ("decoder_train", "dynamic_true"), ("decoder_train", "mark_dynamic"),
             ("decoder_infer", "dynamic_true"), ("decoder_infer", "auto"), ("decoder_train", "capture_sizes"),
             ("decoder_train", "capture_sizes_static"), ("decoder_train", "eager_on_recompile"),
             ("decoder_infer", "capture_sizes_static")}


def marks(model: str, variant: str, fast: bool) -> list:
    """A case's pytest marks: ``slow`` unless ``fast``, ``one_torch`` where :data:`ONE_TORCH` says."""
    import pytest

    return ([] if fast else [pytest.mark.slow]) + ([pytest.mark.one_torch] if (model, variant) in ONE_TORCH else [])


#: shapes_truth.py's CAPTURE_SIZES
CAPTURE_SIZES = "17,64"


def options(model: str, variant: str) -> dict:
    return dict(
        mark_dynamic=MARKS[model] if variant in ("mark_dynamic", "capture_sizes") else (),
        dynamic={"dynamic_true": "true", "dynamic_false": "false", "capture_sizes_static": "false"}.get(variant, "auto"),
        backend="cudagraphs" if variant == "cudagraphs_backend" else "inductor",
        settings=[f"cudagraph_capture_sizes={CAPTURE_SIZES}"] if variant.startswith("capture_sizes") else (),
        stance=variant if variant in ("eager_on_recompile", "force_eager") else None,  # set after call 1, as the rows do
        inference=model in INFERENCE, advise=False)


@functools.cache
def predict(model: str, variant: str):
    """graphtool's ShapeReport for ``MODEL.VARIANT``."""
    from graphtool.commands.shapes import shapes

    [result] = shapes(str(FIXTURES / f"{model}.py"), **options(model, variant))
    return result.report
