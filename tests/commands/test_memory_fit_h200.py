"""``memory --fit`` against the H200 (issue 35): graphtool's predicted step peaks, made on this CPU, beside
tests/truth/gpu/memory-h200-torch2.11.jsonl (torch 2.11, step 5, ``max_memory_allocated`` per phase).

The goal is 5%. Where graphtool is further off, the test asserts the difference as measured on 2026-11-27 (torch
2.13 CPU here, 2.11 there), within 3 points, so a change shows, and says why (docs/memory.md, "Will it fit"):

- MLP: within 5% everywhere (the optimizer's foreach temporaries make the peak; the forward and backward are
  plain matmuls and a GELU).
- CNN, budget 1.0 (-6%): inductor's backward keeps fewer convolution intermediates alive at once than the
  ATen-level timeline frees; budgets 0.5 / 0.1 (+19% / +10%): recomputed BatchNorm/ReLU chains are fused by
  inductor into the kernels that read them, while the timeline materialises each recomputed tensor.
- decoder eager: within 5% (-0.1%) since the eager count backpropagates the loss only (it was +8%: ones into the
  logits too). Compiled 1.0 (+8%), 0.5 (-6%) and 0.1 (+16%): as for the CNN, recomputed
  pointwise chains (RMSNorm, SiLU, rotary) are fused on the GPU. The real decoder's peak falls monotonically;
  graphtool's rises at 0.1 for that reason.

Under reduce-overhead (the row's step-5 ``max_memory_allocated``, which leaves the pool out, plus the pool's
reserved bytes): outside the pool within 5% or 8 MiB everywhere; the pool (graphtool/analysis/memory/pool_step.py)
within 2% for the MLP, the CNN +8% at 1.0 and +24% / +30% at 0.5 / 0.1 (the same recomputed BatchNorm/ReLU chains),
the decoder +4% at 1.0, -9% at 0.5 (the default mode is -6% there too) and -0.4% at 0.1.
"""

from __future__ import annotations

import json

import pytest

from tests.helpers import FIXTURES, ROOT

ROWS = ROOT / "tests" / "truth" / "gpu" / "memory-h200-torch2.11.jsonl"

#: (model, mode) -> graphtool's measured relative difference from the H200 row, where over 5%
MEASURED = {("cnn", "default-1.0"): -0.06, ("cnn", "default-0.5"): 0.19, ("cnn", "default-0.1"): 0.10,
            ("decoder", "default-1.0"): 0.08, ("decoder", "default-0.5"): -0.06,
            ("decoder", "default-0.1"): 0.16}


#: (model, budget) -> the reduce-overhead step's measured relative difference, where over 5%
MEASURED_RO = {("cnn", 1.0): 0.077, ("cnn", 0.5): 0.24, ("cnn", 0.1): 0.297, ("decoder", 0.5): -0.092}

#: graphtool on torch 2.11 (the H200 machine's own torch, this test run there on its CPU on 2026-11-27): the CNN's
#: and the decoder's traced graphs differ from 2.13's, so do the differences; None: within 5%
ON_TORCH_2_11 = {("cnn", "default-1.0"): None, ("cnn", "default-0.1"): None}
ON_TORCH_2_11_RO = {("cnn", 1.0): 0.225, ("cnn", 0.5): 0.313, ("cnn", 0.1): 0.169, ("decoder", 1.0): 0.053,
                    ("decoder", 0.5): -0.145}


def _measured(table: dict, on_2_11: dict) -> dict:
    import torch

    if not torch.__version__.startswith("2.11."):
        return table
    merged = {**table, **on_2_11}
    return {k: v for k, v in merged.items() if v is not None}


def rows() -> dict:
    out = {}
    for line in ROWS.read_text().splitlines():
        r = json.loads(line)
        if not r.get("error"):
            out[(r["model"], r["mode"])] = r
    return out


@pytest.fixture(scope="module", params=["mlp", "cnn", "decoder"])
def predicted(request):
    from graphtool.commands.memory import memory

    (result,) = memory(str(FIXTURES / "fit" / f"{request.param}.py"), fit="H200", budgets="1,0.5,0.1")
    return request.param, result.fit


@pytest.mark.slow  # over 60 s: the slow tier (docs/ci.md)
def test_predicted_step_peaks_beside_the_h200(predicted):
    model, fit = predicted
    truth = rows()
    got = {"eager": fit.eager.peak, **{f"default-{p.budget:g}" if p.budget != 1 else "default-1.0": p.step.peak
                                       for p in fit.budgets}}
    table = _measured(MEASURED, ON_TORCH_2_11)
    for mode, peak in got.items():
        measured = truth[(model, mode)]["step5"]["step_peak"]
        diff = peak / measured - 1
        expected = table.get((model, mode), 0.0)
        tolerance = 0.05 if (model, mode) not in table else 0.03
        assert abs(diff - expected) <= tolerance, (model, mode, peak, measured, f"{diff:+.1%}")


@pytest.mark.slow
def test_reduce_overhead_beside_the_h200(predicted):
    model, fit = predicted
    truth = rows()
    table = _measured(MEASURED_RO, ON_TORCH_2_11_RO)
    for p in fit.budgets:
        step5 = truth[(model, f"ro-{p.budget:.1f}")]["step5"]
        outside, pool = step5["step_peak"], step5["pool_after_forward"]["pool_reserved"]
        ro = p.reduce_overhead
        assert abs((ro.peak - ro.pool) - outside) <= max(0.05 * outside, 8 * 2**20), (model, p.budget, ro, outside)
        diff = ro.peak / (outside + pool) - 1
        expected = table.get((model, p.budget), 0.0)
        tolerance = 0.03 if (model, p.budget) in table else 0.05
        assert abs(diff - expected) <= tolerance, (model, p.budget, ro.peak, outside + pool, f"{diff:+.1%}")
    assert fit.reduce_overhead == fit.budgets[0].reduce_overhead  # budget 1.0 is the trace's own partition
