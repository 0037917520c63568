"""Which size ``--dynamic`` varies: what the script declares, else the inputs' structure (token ids: the
sequence, not the batch); and a model that does not take the varied size is told how to declare it."""

from __future__ import annotations

import json

import pytest
import torch

from graphtool.capture.dynamic_inputs import choose_variant
from graphtool.capture.user.script import load_model
from graphtool.errors import BadModelSpec
from tests.helpers import FIXTURES, example

DYN = FIXTURES / "dynamic"


def test_token_ids_grow_along_the_sequence_and_their_mask_with_them():
    v = choose_variant(load_model(DYN / "fixed_length.py"))
    tokens, mask = v.args
    assert tokens.shape == (2, 13) and mask.shape == (2, 13) and tokens.dtype == torch.int64
    assert (v.name, v.dim) == ("tokens", 1)
    assert v.how == "tokens 2x12 -> 2x13, dim 1: the sequence of integer token ids; mask grown with it"


def test_float_inputs_grow_their_batch():
    v = choose_variant(load_model(example("mlp.py")))
    assert v.dim == 0 and v.args[0].shape[0] == load_model(example("mlp.py")).args[0].shape[0] + 1
    assert v.how.endswith("dim 0: the batch")


def test_declared_dynamic_dims_win_over_the_structure():
    v = choose_variant(load_model(DYN / "declared_dims.py"))
    assert [a.shape for a in v.args] == [(3, 12), (3, 12)] and "the script's dynamic_dims" in v.how


def test_declared_dynamic_inputs_are_used_as_given():
    v = choose_variant(load_model(example("dynamic_batch.py")))
    assert v.args[0].shape == (7, 8) and v.how == "the script's dynamic_inputs" and v.name is None


def test_dynamic_dims_naming_no_input_lists_the_inputs():
    with pytest.raises(BadModelSpec, match="dynamic_dims names 'input_ids', which is not a tensor input") as info:
        choose_variant(load_model(DYN / "bad_dims.py"))
    assert info.value.hint == "the tensor inputs are: tokens, mask"


@pytest.mark.parametrize("declared, message", [
    ({"tokens": 2}, "tokens has 2 dimensions, so 2 is not one of them"),
    ({0: 1, 1: 1}, "dynamic_dims must be one {input: dimension} pair"),
    ("tokens", "dynamic_dims must be one {input: dimension} pair or an int"),
])
def test_bad_dynamic_dims(monkeypatch, declared, message):
    import sys

    spec = load_model(DYN / "fixed_length.py")
    monkeypatch.setattr(sys.modules[spec.module_name], "dynamic_dims", declared, raising=False)
    with pytest.raises(BadModelSpec, match=message.replace("{", r"\{").replace("}", r"\}")):
        choose_variant(spec)


def test_dynamic_dims_by_position(monkeypatch):
    import sys

    spec = load_model(DYN / "fixed_length.py")
    monkeypatch.setattr(sys.modules[spec.module_name], "dynamic_dims", {1: 0}, raising=False)  # the second argument (mask), its batch
    v = choose_variant(spec)
    assert v.name == "mask" and [a.shape for a in v.args] == [(3, 12), (3, 12)]


@pytest.mark.slow  # over 6 s: the slow tier (docs/ci.md)
def test_lint_says_the_varied_size_does_not_fit_and_how_to_declare_it(cli):
    rc, out, _ = cli("lint", DYN / "fixed_length.py", "--dynamic", "--format", "json")
    model = json.loads(out)["models"][0]
    error = model["error"]
    assert rc == 2 and model["status"] == "error"
    # what the example inputs' run found stays (it read "graphs 0 breaks 0"); the failed run's records are not findings
    assert (model["graph_count"], model["recompile_count"], model["skipped_frame_count"]) == (1, 0, 0)
    assert "fixed_length.py:13: --dynamic: the model does not accept inputs of another size" in error
    assert "tokens 2x12 -> 2x13, dim 1: the sequence of integer token ids" in error
    assert "dynamic_dims = {'tokens': 0}" in error and "dynamic_inputs" in error


@pytest.mark.slow  # over 5 s (a lint child, or a script run in its own process)
def test_lint_varies_what_the_script_declares(cli):
    rc, out, _ = cli("lint", DYN / "declared_dims.py", "--dynamic", "--format", "json")
    model = json.loads(out)["models"][0]
    assert rc == 0 and model["status"] == "ok" and "size mismatch at index 0. expected 2, actual 3" in model["recompiles"][0]["reason"]


@pytest.mark.slow  # over 8 s: the slow tier (docs/ci.md)
def test_a_decoder_recompiles_over_its_sequence_not_its_batch(cli):
    """The issue's case: GPT-2's input_ids (1x12) grow to 1x13, the size that varies when serving."""
    pytest.importorskip("transformers")
    rc, out, _ = cli("lint", example("hf_gpt2.py"), "--dynamic", "--format", "json")
    model = json.loads(out)["models"][0]
    assert rc == 0 and "size mismatch at index 1. expected 12, actual 13" in model["recompiles"][0]["reason"]
