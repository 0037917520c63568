"""``graphtool shapes``' bad input: sizes that do not parse (the flag named), a schedule step that is not the
model's inputs (the script's line named), a schedule that never ends (bounded, and said so); exit 2."""

from __future__ import annotations

from pathlib import Path

import pytest

from graphtool.cli.main import run

ROOT = Path(__file__).resolve().parents[2]
FIX = ROOT / "tests" / "fixtures" / "shapes"


@pytest.mark.parametrize("flag,said", [
    ("input_ids=17,33", "expected INPUT:DIM=SIZES"),
    ("input_ids:1=17,x", "'x' is not a whole number"),
    ("input_ids:1=512..1", "the range 512..1 is empty"),
    ("input_ids:1=17,33*4", "mixes a list with a histogram"),
    ("input_ids:1=", "expected INPUT:DIM=SIZES"),
])
def test_sizes_that_do_not_parse_name_the_flag(flag, said, capsys):
    assert run(["shapes", str(FIX / "endless.py"), "--sizes", flag]) == 2
    err = capsys.readouterr().err
    assert f"--sizes {flag!r}" in err and said in err


def test_a_histogram_as_a_counter_prints_it():
    from graphtool.capture.schedule import parse_sizes

    rule = parse_sizes("input_ids:1={17: 40, 33: 12, 64: 0}")
    assert rule.histogram == ((17, 40), (33, 12))
    sizes = rule.sizes(steps=0, seed=0)
    assert sorted(sizes) == [17] * 40 + [33] * 12 and sizes != sorted(sizes)  # shuffled, as a dataloader's epoch


@pytest.mark.parametrize("args,said", [
    (["--dynamic", "maybe"], "--dynamic 'maybe': one of auto, true, false"),
    (["--max-steps", "0"], "--max-steps 0: a whole number >= 1"),
    (["--mark-dynamic", "input_ids"], "--mark-dynamic 'input_ids': expected INPUT:DIM"),
    (["--backend", "aot_eager"], "--backend 'aot_eager' is not one of inductor, cudagraphs"),
    (["--stance", "eager"], "--stance 'eager': one of default, eager_on_recompile, fail_on_recompile, force_eager"),
    (["--set", "cudagraph_capture_sizes=17,x"], "cudagraph_capture_sizes takes sizes separated by commas"),
    (["--set", "cudagraph_capture_sizes=none"], "cudagraph_capture_sizes takes sizes separated by commas"),
])
def test_bad_flags_are_usage_errors(args, said, capsys):
    assert run(["shapes", str(FIX / "endless.py"), *args]) == 2
    assert said in capsys.readouterr().err


def test_a_step_that_is_not_the_models_inputs_names_the_yield_line(capsys):
    assert run(["shapes", str(FIX / "bad_yield.py")]) == 2
    err = capsys.readouterr().err
    assert "bad_yield.py:11: get_input_schedule() step 2 is str, not the model's inputs" in err


def test_a_step_that_changes_a_rank_is_refused(capsys):
    assert run(["shapes", str(FIX / "wrong_rank.py")]) == 2
    err = capsys.readouterr().err
    assert "wrong_rank.py:9: get_input_schedule() step 2: input 0 is a 1-d torch.float32 tensor" in err


def test_an_unknown_input_name_lists_the_inputs(capsys):
    assert run(["shapes", str(FIX / "endless.py"), "--sizes", "input_ids:1=3,4"]) == 2
    err = capsys.readouterr().err
    assert "the model has no tensor input named 'input_ids'" in err and "input" in err


@pytest.mark.slow  # a stand-in trace of 6 steps: ~10 s on 2 cores
def test_a_schedule_that_never_ends_is_bounded_and_says_so(capsys):
    assert run(["shapes", str(FIX / "endless.py"), "--max-steps", "6", "--format", "json", "--no-advice"]) == 0
    import json

    doc = json.loads(capsys.readouterr().out)["shapes"]
    assert doc["steps"] == 6 and "goes on past --max-steps 6" in doc["left_out"]
    assert doc["graphs_compiled"] == 2 and doc["symbolic"] == ["input:0"]
