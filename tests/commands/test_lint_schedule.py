"""``graphtool lint --schedule``: a recompile budget over the loop's own shapes, and the recompile limit as an error
(issue 34). Each model runs in lint's child under a real ``torch.compile``; what it counts is set beside a bare
``torch.compile`` loop over the same schedule, on the torch installed.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import example

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
PAST_THE_LIMIT = str(FIXTURES / "lint_schedule" / "past_the_limit.py")
LAST_BATCH = str(FIXTURES / "shapes" / "cnn_last_batch.py")

# torch alone: the fixture's loop under a counting backend, and the frame's fate past recompile_limit
BARE_LOOP = """
import runpy, sys, torch
ns = runpy.run_path(sys.argv[1])
model, _ = ns["get_model_and_inputs"]()
graphs = []
def count(gm, example_inputs):
    graphs.append(gm)
    return gm.forward
compiled = torch.compile(model, backend=count)
for args in ns["get_input_schedule"]():
    compiled(*args)
print(len(graphs), torch._dynamo.config.recompile_limit)
"""


def _lint(cli, *args):
    rc, out, err = cli("lint", *args, "--format", "json")
    return rc, (json.loads(out)["models"][0] if out.strip() else None), err


@pytest.mark.slow
@pytest.mark.versions  # the limit and what compiles before it are torch's: checked on every tested torch
def test_a_loop_past_the_recompile_limit_fails_whatever_the_budget_and_counts_what_torch_compiles(cli):
    rc, model, _ = _lint(cli, PAST_THE_LIMIT, "--schedule")
    bare = subprocess.run([sys.executable, "-c", BARE_LOOP, PAST_THE_LIMIT], capture_output=True, text=True, timeout=300)
    assert bare.returncode == 0, bare.stderr
    graphs, limit = map(int, bare.stdout.split())
    assert graphs == limit == 8  # 12 lengths, automatic dynamic off: one graph each until the limit
    assert rc == 1 and model["status"] == "over_budget"
    assert model["graph_count"] == graphs and model["recompile_count"] == graphs
    assert "recompile limit" in model["recompile_limit_hit"].lower()
    assert any(f.startswith("recompile limit hit") and "runs eagerly" in f for f in model["failures"])
    assert model["schedule"]["steps"] == 12 and model["schedule"]["source"].startswith("get_input_schedule() at ")
    assert model["budget"]["max_recompiles"] is None  # no budget was set: the limit alone fails it


@pytest.mark.slow
def test_the_schedule_is_what_finds_the_short_last_batch(cli):
    rc, alone, _ = _lint(cli, LAST_BATCH, "--max-recompiles", "0")
    assert rc == 0 and alone["recompile_count"] == 0 and alone["schedule"] is None
    rc, looped, _ = _lint(cli, LAST_BATCH, "--schedule", "--max-recompiles", "0")
    assert rc == 1 and looped["recompile_count"] == 1  # the short batch: automatic dynamic, one recompile
    assert "size mismatch at index 0. expected 32, actual 7" in looped["recompiles"][0]["reason"]
    assert looped["failures"] == ["1 recompile, budget 0"] and looped["recompile_limit_hit"] is None
    assert looped["schedule"]["steps"] == 8


@pytest.mark.parametrize(("args", "said"), [
    pytest.param((example("mlp.py"), "--schedule"), "--schedule: the script has no get_input_schedule()",
                 marks=pytest.mark.slow),  # a lint child: torch's import, the model's compile
    (("--schedule", "--run", example("mlp.py")), "--schedule lints a model script's get_input_schedule()"),
])
def test_schedule_without_a_schedule_to_read_is_a_usage_error(cli, args, said):
    rc, out, err = cli("lint", *args)
    assert rc == 2 and said in out + err
