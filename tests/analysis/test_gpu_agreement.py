"""Every row of tests/truth/gpu/examples-h100-torch2.11.jsonl (what torch 2.11 did on an H100 over a 5-step
loop, per example and backend) agrees with what graphtool predicts now, on the meta stand-in, no GPU:

- skipped or not: torch's skip counter against graphtool's skip reasons, each torch skip message among them;
- graphs dynamo compiled, recompiles included (``unique_graphs``) against the steady state's graphs compiled;
- CUDA-graphed pieces: distinct functions cudagraph trees recorded, or where that was not measured the
  CUDA graphs run (recorded or replayed) in step 5;
- every ``torch.cuda.graph`` capture over the 5 steps: recordings, plus the trees' memory pool.

One example read data the GPU drew from the CUDA generator: ``examples/item_branch.py``'s
``if y.sum().item() > 0`` took the ``y - 1`` branch on the H100 (its weights come from the CUDA generator when the
model is built under ``torch.device("cuda")``), whose backward is the gradient passed through, no kernel: inductor
makes no partition for it and CUDA-graphs 3 pieces, the cudagraphs backend 4 (the rows say so: 3 and 4). On the
CPU the sum is positive; the test replays the GPU's reading, a non-positive sum, for each step.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
ROWS = [json.loads(line) for line in (ROOT / "tests" / "truth" / "gpu" / "examples-h100-torch2.11.jsonl").read_text().splitlines()
        if line.strip()]
STEPS = 5
SLOW = {"examples/hf_gpt2.py", "examples/hf_llama.py", "examples/transformer.py", "examples/convnet_bn.py"}
#: host values the GPU read where they came from the CUDA generator: one per step
GPU_READS = {"examples/item_branch.py": [-1.0] * STEPS}


@functools.cache
def predict(model: str, backend: str):
    """graphtool's verdict with its steady state over 5 steps, as ``graphtool cudagraphs --steps 5`` gives it."""
    from dataclasses import replace

    from graphtool.analysis.cudagraphs import cudagraph_verdict
    from graphtool.analysis.steady_state import steady_state

    if model in GPU_READS:
        from graphtool.capture.host_values import HostValues
        from graphtool.capture.meta_standin import to_meta
        from graphtool.capture.script import load_model
        from graphtool.capture.tracer import trace_model

        values = HostValues()
        values.values.extend(GPU_READS[model])
        capture = trace_model(to_meta(load_model(str(ROOT / model))), backend=backend, standin=True, steps=STEPS,
                              host_values=values, host_mode="replay")
        assert capture.stopped is None and not values.values
        verdict = cudagraph_verdict(capture, backend=backend)
        return replace(verdict, steady=steady_state(capture, verdict))
    from graphtool.commands.cudagraphs import cudagraphs

    [result] = cudagraphs(str(ROOT / model), backend=backend, steps=STEPS)
    assert result.stopped is None
    return result.report


def _cases():
    return [pytest.param(r, id=f"{r['model'].split('/')[-1]}-{r['backend']}",
                         marks=[pytest.mark.slow] if r["model"] in SLOW else []) for r in ROWS]


@pytest.mark.parametrize("row", _cases())
def test_graphtool_agrees_with_the_h100(row):
    truth = row["torch"]
    verdict = predict(row["model"], row["backend"])
    steady = verdict.steady
    skips = [r for r in verdict.reasons if r.skips]
    facts = {
        "skipped": bool(skips),
        "dynamo_graphs_compiled": steady.graphs_compiled,
        "cudagraphed_pieces": steady.functions_graphed if truth["distinct_functions_graphed"] is not None
        else steady.graphs_run_last_step,
        "captures": steady.captures,
    }
    expected = {
        "skipped": truth["cudagraph_skip_counter"] > 0,
        "dynamo_graphs_compiled": truth["dynamo_graphs_compiled"],
        "cudagraphed_pieces": truth["distinct_functions_graphed"] if truth["distinct_functions_graphed"] is not None
        else truth["graph_replays_in_step_5"],
        "captures": truth["cuda_graph_captures_in_5_steps"],
    }
    assert facts == expected
    for message in truth["skip_messages"]:
        said = message.split(". Found from")[0]
        assert any(said in (r.torch_message or r.message) for r in skips), (said, [r.message for r in skips])


def test_every_row_is_checked():
    assert len(ROWS) == 28 and {r["backend"] for r in ROWS} == {"inductor", "cudagraphs"}
