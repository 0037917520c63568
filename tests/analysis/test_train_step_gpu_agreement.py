"""The rows of tests/truth/gpu/train-h200-torch2.11.jsonl (a whole training step compiled with
``mode="reduce-overhead"`` on an H200, torch 2.11, 5 calls: tests/truth/gpu/train_truth.py) against what graphtool
predicts on the meta stand-in, ``graphtool cudagraphs --steps 5``: graphs dynamo compiled, functions cudagraph trees
recorded, ``torch.cuda.graph`` captures (the trees' one pool warm-up included) and skipped or not, after call 5
(``calls[-1]``). Each fixture (tests/fixtures/train_step/gpu_*.py) builds what ``build(case)`` builds.

Where graphtool cannot agree, the test says what it predicts instead and why:

- ``sgd_momentum``: the H200 recompiled the step after call 1 (``len(self.state[...]) != 0``: the momentum buffer
  appears) and then torch raised on call 2, inside dynamo, ``accessing tensor output of CUDAGraphs that has been
  overwritten by a subsequent run`` (sgd.py's step reading a momentum buffer a CUDA-graph replay had overwritten).
  The stand-in runs no CUDA graph, so nothing is overwritten: graphtool predicts the recompile (3 graphs) and a
  steady 3 functions, what the step would do had torch not raised. It does not copy torch's error.
- ``adamw_fused``: torch's fused AdamW refuses parameters on meta (its supported devices list no meta); the
  stand-in adds meta to that list while it traces (``compat.fused_optimizers_on_meta``: ``torch._fused_adamw_``
  has a meta kernel), and then agrees with the H200: 1 graph, 2 functions recorded (the fused kernel runs in a
  ``torch.compiler.disable``d function).
- the two scheduler cases: the GPU run steps the scheduler between calls, outside the compiled step; graphtool
  calls only the model, so those fixtures step it at the end of the step (the optimizer sees the same lr on each
  call). The counts checked agree; the graph breaks differ (``sched.step()`` is traced).
"""

from __future__ import annotations

import functools
import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
def _rows(card: str) -> dict:
    return {r["case"]: r for r in (json.loads(line) for line in
            (ROOT / "tests" / "truth" / "gpu" / f"train-{card}-torch2.11.jsonl").read_text().splitlines() if line.strip())}


ROWS = _rows("h200")
#: the same script on an H100 (2026-11-27, torch 2.11): the counts are the card's no more than the step's
H100_ROWS = _rows("h100")
STEPS = 5
#: over 5 s each on the 2-core CI machine: the slow tier (docs/ci.md)
SLOW = {"clip_grad_norm", "adam_foreach", "grad_accum", "sched_float_lr", "sched_tensor_lr", "opt_step_only", "sgd_momentum",
        "adamw_fused"}
AGREE = ["adam_foreach", "adamw_foreach", "grad_accum", "clip_grad_norm", "sched_float_lr", "sched_tensor_lr",
         "opt_step_only", "adamw_fused"]


@functools.cache
def predict(case: str):
    from graphtool.commands.cudagraphs import cudagraphs

    [result] = cudagraphs(str(ROOT / "tests" / "fixtures" / "train_step" / f"gpu_{case}.py"), backend="inductor", steps=STEPS)
    return result


def _facts(result) -> dict:
    verdict = result.report
    steady = verdict.steady
    return {"skipped": bool([r for r in verdict.reasons if r.skips]), "graphs_compiled": steady.graphs_compiled,
            "functions_graphed": steady.functions_graphed, "captures": steady.captures}


def _truth(case: str) -> dict:
    last = ROWS[case]["calls"][-1]
    return {"skipped": last["cudagraph_skips"] > 0, "graphs_compiled": last["unique_graphs"],
            "functions_graphed": last["functions_graphed"], "captures": last["captures"]}


@pytest.mark.parametrize("case", [pytest.param(c, marks=[pytest.mark.slow] if c in SLOW else []) for c in AGREE])
def test_a_compiled_training_step_agrees_with_the_h200(case):
    result = predict(case)
    assert result.stopped is None
    assert ROWS[case]["error"] is None and ROWS[case]["calls"][-1]["call"] == 5
    assert _facts(result) == _truth(case)


@pytest.mark.slow  # over 5 s: the slow tier (docs/ci.md)
def test_sgd_momentum_recompiles_once_where_the_h200_then_raised():
    row = ROWS["sgd_momentum"]
    assert "overwritten by a subsequent run" in row["error"] and len(row["calls"][-1]["recompiles"]) == 1
    result = predict("sgd_momentum")
    assert result.stopped is None
    assert _facts(result) == {"skipped": False, "graphs_compiled": 3, "functions_graphed": 3, "captures": 4}
    assert result.report.steady.failed is None


def test_every_row_has_a_fixture_or_a_reason():
    checked = set(AGREE) | {"sgd_momentum"}
    assert set(ROWS) - checked == {"tiny_gpt_adamw"}  # a TransformerEncoder: not written as a fixture yet


def test_the_h100_counted_what_the_h200_did():
    """What these tests check against the H200 is the step's, not the card's: on an H100 the same script counted
    the same graphs, breaks, captures, recorded functions and skips after every call, and raised the same error."""
    def counts(rows):
        return {case: ([(c.get("call"), c["unique_graphs"], c["graph_breaks"], c["captures"], c["functions_graphed"],
                         c["cudagraph_skips"], len(c["recompiles"])) for c in r["calls"]], (r["error"] or "")[:60])
                for case, r in rows.items()}
    assert len(ROWS) == 10 and counts(H100_ROWS) == counts(ROWS)


def test_the_breaks_of_a_compiled_step_get_help_for_their_cause():
    """Issue 44, item 5, on the real trace of a compiled AdamW step (this torch's break records): the CUDA-graph verdict
    said "remove the break to get one graph" for ``loss.backward()``, for torch's own ``optimizer.py`` and for
    ``opt.zero_grad()``; each now gets the help trace and lint give for that cause (tests/render/test_break_help.py)."""
    fixes = {r.source.line if r.source else None: r.fix for r in predict("adamw_foreach").report.reasons
             if r.code == "graph-break"}
    assert fixes[16].startswith("dynamo ends the graph at backward()")  # loss.backward()
    assert fixes[18].startswith("dynamo never traces Optimizer.zero_grad")  # opt.zero_grad(set_to_none=True)
    [optimizer] = [f for line, f in fixes.items() if line not in (16, 18)]  # torch's optimizer.py, under opt.step()
    assert optimizer.startswith("torch's optimizer breaks the graph on purpose") and "torch.compile(opt.step)" in optimizer
