"""``lint --max-peak-memory`` (and ``max_peak_memory`` in graphtool.yaml): the training step's predicted peak as a
budget (issue 35). The peak is ``graphtool memory --fit``'s own, for the same model, run in a child of its own.
"""

from __future__ import annotations

import json

import pytest

from tests.helpers import example

MLP = example("mlp.py")


@pytest.mark.slow  # a lint child and a memory child per model
def test_a_step_over_the_budget_fails_with_the_peak_memory_predicts(cli, tmp_path):
    rc, out, _ = cli("memory", MLP, "--fit", "1KiB", "--format", "json")
    peak = json.loads(out)["fit"]["compiled"]["peak"]
    rc, out, _ = cli("lint", MLP, "--max-peak-memory", "1KiB", "--format", "json")
    model = json.loads(out)["models"][0]
    assert rc == 1 and model["status"] == "over_budget"
    assert model["peak_memory"]["predicted_peak"] == peak and model["peak_memory"]["budget_bytes"] == 1024
    assert model["failures"][0].startswith("predicted step peak ") and "budget 1KiB (max_peak_memory): does not fit" in model["failures"][0]
    # the same budget from the config file, and one the step fits
    (tmp_path / "graphtool.yaml").write_text(f"max_peak_memory: 1GiB\nmodels:\n  - path: {MLP}\n")
    rc, out, _ = cli("lint", "--config", str(tmp_path / "graphtool.yaml"), "--format", "json")
    model = json.loads(out)["models"][0]
    assert rc == 0 and model["peak_memory"]["predicted_peak"] == peak and model["budget"]["max_peak_memory"] == "1GiB"


@pytest.mark.parametrize(("args", "said"), [
    ((MLP, "--max-peak-memory", "H300"), "max_peak_memory 'H300': not a size or a GPU graphtool knows"),
    (("--max-peak-memory", "1GiB", "--run", MLP), "--max-peak-memory predicts a model script's training step"),
])
def test_a_budget_memory_cannot_judge_is_a_usage_error(cli, args, said):
    rc, out, err = cli("lint", *args)
    assert rc == 2 and said in err
