"""A whole training step compiled as people compile it (forward, ``loss.backward()``, ``opt.step()``,
``opt.zero_grad()`` in the function handed to ``torch.compile``), graphtool against a real
``torch.compile`` of the same step on CPU, each called 3 times as a loop calls it.

Each case is a script in ``tests/fixtures/train_step``. torch's side (:func:`tests.truth.torch_truth.run_torch_steps`)
compiles the step with the backend and calls it 3 times, listening to torch's structured trace; graphtool's
side is ``trace_model(spec, backend=B, steps=3)``. Compared: the graphs torch compiled (how many, in which
step, each AOT graph's node count and ops), the graph breaks (file, line, gb id), the frames dynamo skipped,
the recompiles (the frame and torch's guard failure) and, per graph, the inputs it writes in place
(parameters, optimizer state) named from the script's own objects.

Every case compiles inductor's code for real (C++ on CPU) and runs 3 steps: all slow.
"""

from __future__ import annotations

import functools
from pathlib import Path

import pytest

from tests.truth import torch_truth as tt

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "train_step"
CASES = ["sgd_momentum", "adam", "adamw", "grad_accum", "clip", "lr_float", "lr_tensor", "optimizer_step",
         "trace_autograd_ops", "compiled_autograd", "adamw_fused"]
STEPS = 3

pytestmark = pytest.mark.slow  # over 30 s a case on 2 cores (a real inductor compile, 3 steps, both sides): the slow tier (docs/ci.md)


def _own_config():
    """The script's own ``torch._dynamo.config`` settings (trace_autograd_ops.py and compiled_autograd.py turn one on at
    import) last while it runs, and are put back after, as they would end with its process."""
    import torch

    config = torch._dynamo.config
    return config.patch(trace_autograd_ops=config.trace_autograd_ops, compiled_autograd=config.compiled_autograd)


@functools.cache
def _torch(name: str, backend: str) -> tt.StepRun:
    with _own_config():
        return tt.run_torch_steps(str(FIXTURES / f"{name}.py"), backend, steps=STEPS)


@functools.cache
def _graphtool(name: str, backend: str):
    from graphtool.capture.tracer import trace_model
    from graphtool.capture.user.script import load_model

    with _own_config():
        return trace_model(load_model(FIXTURES / f"{name}.py"), backend=backend, steps=STEPS)


@pytest.fixture(scope="module", params=CASES)
def case(request):
    """One real torch run and one graphtool trace per case, shared by every assertion below."""
    name, backend = request.param, "inductor"
    run = _torch(name, backend)
    assert run.error is None, f"{name}: the real torch.compile failed: {run.error}"
    return name, run, _graphtool(name, backend)


def test_the_step_runs_its_own_backward(case):
    name, _run, cap = case
    assert cap.own_step is not None
    assert cap.own_step.kind == ("optimizer_step" if name == "optimizer_step" else "train_step")
    assert cap.steps.steps == STEPS and cap.steps.failed is None


def test_graphs_and_the_step_each_compiled_in(case):
    name, run, cap = case
    assert [r.step for r in cap.regions] == [r.step for r in run.regions], f"{name}: regions per step differ"
    problems = []
    for mine, theirs in zip(cap.regions, run.regions):
        graphs = {"aot_inference_graph": mine.forward} if mine.inference else {"aot_forward_graph": mine.forward}
        if mine.backward is not None:
            graphs["aot_backward_graph"] = mine.backward
        if set(graphs) != set(theirs.graphs):
            problems.append(f"region {mine.index}: graphtool has {sorted(graphs)}, torch logged {sorted(theirs.graphs)}")
            continue
        for key, gm in graphs.items():
            lowered = theirs.after_joint_graph if key == "aot_inference_graph" else None
            got, want = tt.parse_graph_text(tt.graph_text(gm)), tt.parse_graph_text(lowered or theirs.graphs[key])
            if got != want:
                problems.append(f"region {mine.index} {key}: graphtool {got[0]} nodes, torch {want[0]}; "
                                f"ops (graphtool, torch): {tt.hist_diff(got[1], want[1])}")
    assert not problems, f"{name}:\n" + "\n".join(problems)


def test_graph_breaks_and_skipped_frames(case):
    name, run, cap = case
    mine = {(Path(b.file).name if b.file else None, b.line, b.code) for b in cap.breaks}
    assert mine == run.breaks, f"{name}: graphtool {sorted(mine, key=str)}, torch {sorted(run.breaks, key=str)}"
    assert {f.function for f in cap.skipped_frames} == run.skipped


def test_a_script_that_turns_on_trace_autograd_ops_is_traced_with_it():
    """The script's own ``torch._dynamo.config.trace_autograd_ops = True`` holds in graphtool's trace as in torch's:
    ``loss.backward()`` is traced (no gb0123 break), and the step breaks where it returns the loss whose grad_fn
    that backward consumed (gb4927)."""
    run, cap = _torch("trace_autograd_ops", "inductor"), _graphtool("trace_autograd_ops", "inductor")
    codes = {b.code for b in cap.breaks}
    assert "gb4927" in codes and "gb0123" not in codes
    assert {code for _file, _line, code in run.breaks} == codes


def test_recompiles_over_the_steps(case):
    name, run, cap = case
    mine = [(r.step, r.function, r.reason) for r in cap.steps.recompiles]
    assert mine == run.recompiles, f"{name}: graphtool {mine}, torch {run.recompiles}"


def test_what_each_graph_writes_in_place(case):
    name, run, cap = case
    for mine, theirs in zip(cap.regions, run.regions):
        wrote = {rec.ref.name for rec in mine.forward_inputs if rec.ref is not None and rec.mutates_data}
        assert wrote == run.mutated(theirs), f"{name} region {mine.index}"


def test_the_facts_the_issue_states():
    """What torch does with these steps, as measured (torch 2.13, CPU, inductor): a float lr a scheduler
    changes recompiles the optimizer's graph on every step it changes (a counting backend recompiles it once,
    then reads the float as dynamic: inductor specializes it again); a tensor lr never does;
    SGD's momentum buffer is made by the first step, so the second compiles again; AdamW writes its
    parameters and ``exp_avg``, ``exp_avg_sq`` and ``step`` in place."""
    assert [(s, f) for s, f, _ in _torch("lr_float", "inductor").recompiles] == [(2, "step"), (3, "step")]
    assert "self.param_groups[0]['lr'] == 0.001" in _torch("lr_float", "inductor").recompiles[0][2]
    assert _torch("lr_tensor", "inductor").recompiles == []
    assert [s for s, _, _ in _torch("sgd_momentum", "inductor").recompiles] == [2]
    run = _torch("adamw", "inductor")
    keys = {n.rsplit(".", 1)[1] for n in run.mutated(run.regions[-1]) if n.startswith("opt.state")}
    assert keys == {"exp_avg", "exp_avg_sq", "step"}
    assert ("adamw.py", 14, "gb0123") in run.breaks and ("adamw.py", 16, "gb0008") in run.breaks
