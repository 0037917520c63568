"""The truth models of the steady state (tests/fixtures/steady, examples/transpose_input.py): graphtool's
steady-state count of the graphs dynamo compiles and of its recompiles, with the guard failure in torch's
words, equals a real ``torch.compile`` loop's on the CPU (:mod:`tests.analysis.steady_truth`: dynamo's
``unique_graphs`` and its ``recompiles`` log, torch's own truth, with AOT autograd's tracing as inductor has it).
``moe_mixtral`` runs under whatever transformers is installed: 5.24 compiles 1 graph, 5.17 (the H200's) 6.

What cudagraph trees record cannot be computed without a GPU: those counts are checked against the rows
recorded on an H100 (tests/analysis/test_gpu_agreement.py), and here only for their shape over the steps
(a warm-up, then a recording, then replays; a recompiled size recorded again)."""

from __future__ import annotations

import functools
import re

import pytest

from tests.analysis.steady_truth import torch_loop
from tests.helpers import FIXTURES, ROOT

STEPS = 3
MODELS = {
    "transpose_input": str(ROOT / "examples" / "transpose_input.py"),  # t_() on an input: the second call recompiles
    "tolist_gate": str(FIXTURES / "steady" / "tolist_gate.py"),  # a .tolist() loop, then a tensor's truth value
    "mha_padding_eval": str(FIXTURES / "steady" / "mha_padding_eval.py"),  # MHA with a padding mask, inference
    "moe_mixtral": str(FIXTURES / "steady" / "moe_mixtral.py"),  # MoE routing, transformers Mixtral tiny config
    # a custom op whose backward reads .tolist(): AOT cannot compile the frame, dynamo compiles its callees
    "custom_op_tolist_backward": str(FIXTURES / "steady" / "custom_op_tolist_backward.py"),
}
SLOW = {"moe_mixtral"}


@functools.cache
def graphtool_steady(name: str):
    from graphtool.commands.cudagraphs import cudagraphs

    [result] = cudagraphs(MODELS[name], steps=STEPS)
    assert result.stopped is None, result.stopped
    return result.report.steady


def _guard(text: str) -> str:
    """torch's guard failure without its frame and compile ids: ``tensor 'x' size mismatch at index 0...``."""
    return re.sub(r"^\s*-?\s*\d+/\d+:\s*", "", text.strip().splitlines()[-1])


@pytest.mark.parametrize("name", [pytest.param(n, marks=[pytest.mark.slow] if n in SLOW else []) for n in MODELS])
def test_graphs_and_recompiles_agree_with_a_real_loop(name):
    steady = graphtool_steady(name)
    truth = torch_loop(MODELS[name], STEPS)
    recompiles = [r for f in steady.per_step for r in f.recompiles]
    assert steady.graphs_compiled == truth.graphs
    assert [_guard(r.reason) for r in recompiles] == [_guard(m) for m in truth.recompiles]


def test_a_recompile_is_named_at_the_users_function_in_torchs_words():
    steady = graphtool_steady("transpose_input")
    [step2] = [f for f in steady.per_step if f.step == 2]
    first = step2.recompiles[0]
    assert (first.function, first.line) == ("transpose_in_place", 5) and first.file.endswith("examples/transpose_input.py")
    assert "tensor 'x' size mismatch at index 0. expected 2, actual 3" in first.reason


def test_an_alternating_input_is_not_steady_after_three_steps():
    """t_() flips the input every step: two graphs, each warmed up, then recorded one step apart."""
    steady = graphtool_steady("transpose_input")
    assert [(f.warmups, f.recordings, f.replays) for f in steady.per_step] == [(1, 0, 0), (1, 0, 0), (0, 1, 0)]
    # step 3 records a graph for the first time (warmed up in step 1): not yet steady, but no re-record either
    assert steady.steady_from is None and steady.rerecords == 0
    assert "not steady yet: step 3 still records 1 CUDA graph for the first time; run --steps 5" in steady.summary()
    assert "NOT STEADY" not in steady.summary()


def test_an_alternating_input_settles_by_step_five_as_the_h100_counted():
    """examples/transpose_input.py on the H100: 3 captures in 5 steps (2 recordings and the pool), 1 replay in step 5."""
    from graphtool.commands.cudagraphs import cudagraphs

    [result] = cudagraphs(MODELS["transpose_input"], steps=5)
    steady = result.report.steady
    assert [(f.warmups, f.recordings, f.replays) for f in steady.per_step] == [(1, 0, 0), (1, 0, 0), (0, 1, 0), (0, 1, 0), (0, 0, 1)]
    assert steady.steady_from == 5 and steady.captures == 3 and steady.rerecords == 0


def test_a_re_record_in_the_last_step_is_said_loudly():
    from graphtool.analysis.steady_state import SteadyState, StepFacts

    steps = (StepFacts(1, 1, (), 1, 1, 0, 0, 0), StepFacts(2, 1, (), 1, 1, 0, 0, 0), StepFacts(3, 0, (), 1, 0, 1, 0, 0))
    growing = SteadyState(steps=3, per_step=steps, graphs_compiled=2, functions_graphed=1, recordings=1, rerecords=1,
                          pool_capture=True, steady_from=None, last_step_rerecords=1)
    assert "NOT STEADY: step 3 still records 1 CUDA graph (a re-record every step is the worst case" in growing.summary()


def test_a_steady_model_replays_from_its_third_step():
    steady = graphtool_steady("tolist_gate")
    last = steady.per_step[-1]
    assert steady.steady_from == 3 and last.recordings == 0 and last.replays == steady.recordings > 0


def test_a_cpu_scalar_constant_does_not_split_inductors_graph():
    """torch.tensor(0.5) in forward: inductor inlines it into the GPU kernel (no CPU scheduler node), so each
    graph is one CUDA-graphed partition: 2 recorded, as the H100 recorded for such a model."""
    from graphtool.commands.cudagraphs import cudagraphs

    [result] = cudagraphs(str(FIXTURES / "steady" / "cpu_scalar_constant.py"), steps=STEPS)
    verdict = result.report
    assert [(p.graph, p.cudagraphed) for p in verdict.partitions] == [("forward", True), ("backward", True)]
    assert verdict.steady.recordings == 2 and verdict.steady.captures == 3


def test_a_frame_the_backend_cannot_compile_is_no_graph():
    """AOT fails on the custom op's backward (``.tolist()`` of a fake tensor): dynamo runs ``forward`` eagerly and
    compiles ``Pre`` and ``Post``: 2 graphs, as torch counts (a failed compile is no graph). graphtool once counted the
    failed frame as a region and, on the meta stand-in, the op's fake kernel as one more: 4 graphs."""
    steady = graphtool_steady("custom_op_tolist_backward")
    assert steady.graphs_compiled == 2 and steady.functions_graphed == 4 and steady.steady_from == 3
    # without AOT (backend="eager") the custom op is one more call in a single graph: the truth needs AOT's tracing
    assert torch_loop(MODELS["custom_op_tolist_backward"], 1, backend="eager").graphs == 1


def test_the_stand_in_compiles_no_frame_of_a_fake_kernel():
    from graphtool.commands.cudagraphs import cudagraphs

    [result] = cudagraphs(MODELS["custom_op_tolist_backward"], steps=1)
    assert result.stopped is None  # it was: "the stand-in compiled 4 regions where the own-device run compiled 3"
    assert result.report.regions == 2
