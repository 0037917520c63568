"""``graphtool cudagraphs --steps N``: the loop's steady state, in text and JSON; bad N exits 2 before tracing."""

from __future__ import annotations

import json

import pytest

from tests.helpers import example


@pytest.mark.parametrize("bad", ["0", "-2", "three", "1.5"])
def test_a_bad_number_of_steps_exits_2(cli, bad):
    rc, out, err = cli("cudagraphs", example("mlp.py"), "--steps", bad)
    assert rc == 2 and out == "" and "--steps" in err


def test_steps_run_as_a_loop_in_json(cli):
    rc, out, _ = cli("cudagraphs", example("mlp.py"), "--steps", "4", "--format", "json")
    steady = json.loads(out)["cudagraphs"]["steady_state"]
    assert rc == 0 and steady["steps"] == 4 and steady["steady"] and steady["steady_from"] == 3
    # forward and backward: warmed up in step 1, recorded in step 2, replayed from step 3
    assert [(s["warmups"], s["recordings"], s["replays"]) for s in steady["per_step"]] == [(2, 0, 0), (0, 2, 0), (0, 0, 2), (0, 0, 2)]
    assert steady["captures"] == 3  # two recordings and the trees' memory pool, as the H100 counted for mlp.py


def test_one_step_says_how_to_see_the_steady_state(cli):
    rc, out, _ = cli("cudagraphs", example("mlp.py"), "--steps", "1")
    assert rc == 0 and "run --steps 3 or more to see the steady state" in out


def test_a_recompile_is_shown_with_its_guard_failure_and_a_loud_verdict(cli):
    rc, out, _ = cli("cudagraphs", example("transpose_input.py"))
    assert rc == 0
    assert "recompiled transpose_in_place (examples/transpose_input.py:5): 0/0: tensor 'x' size mismatch" in out
    assert "not steady yet: step 3 still records 1 CUDA graph for the first time; run --steps 5" in out


def test_a_skipped_graph_never_reaches_a_recording(cli):
    rc, out, _ = cli("cudagraphs", example("cpu_roundtrip.py"), "--backend", "cudagraphs", "--format", "json")
    steady = json.loads(out)["cudagraphs"]["steady_state"]
    assert steady["recordings"] == steady["captures"] == 0  # the H100: 0 captures, skip counter 1
    assert all(s["skipped_calls"] == 2 for s in steady["per_step"])


def test_a_step_that_fails_on_its_second_run_keeps_the_first(cli):
    from tests.helpers import FIXTURES

    rc, out, _ = cli("cudagraphs", FIXTURES / "steady" / "second_call_fails.py", "--format", "json")
    steady = json.loads(out)["cudagraphs"]["steady_state"]
    assert rc == 0 and steady["steps"] == 1 and not steady["steady"]
    assert steady["failed"].startswith("step 2 raised at ") and "second_call_fails.py:16: ValueError: this model runs once" in steady["failed"]


def test_a_recompile_inside_torchs_own_module_is_named_at_the_script(cli):
    """--dynamic's second size recompiles an nn.Sequential: its frame is torch's wrapper, its place the user's script."""
    rc, out, _ = cli("cudagraphs", example("dynamic_batch.py"), "--dynamic", "--format", "json")
    [first] = json.loads(out)["cudagraphs"]["steady_state"]["recompiles"][:1]
    assert rc == 0 and first["function"] == "Sequential" and first["file"].endswith("examples/dynamic_batch.py")
    assert "size mismatch at index 0" in first["reason"]


def test_dynamic_serves_both_sizes_every_step_one_cuda_graph_per_size(cli):
    rc, out, _ = cli("cudagraphs", example("dynamic_batch.py"), "--dynamic", "--steps", "4", "--format", "json")
    steady = json.loads(out)["cudagraphs"]["steady_state"]
    # the dynamic graph's forward and backward, recorded once for batch 4 and once for batch 7
    assert rc == 0 and steady["functions_graphed"] == steady["recordings"] == 4 and steady["rerecords"] == 2
    assert steady["steady_from"] == 4 and steady["per_step"][-1]["replays"] == 4
