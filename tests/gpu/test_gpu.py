"""GPU agreement tests: the predicted CUDA-graph verdict against what torch really does on CUDA.

Marked ``cuda``: skipped with a reason where no GPU is present (CI). Results of a GPU run are
recorded in docs/gpu-results.md."""

from __future__ import annotations

import pytest
import torch

pytestmark = [
    pytest.mark.cuda,
    pytest.mark.skipif(
        not torch.cuda.is_available(),
        reason="needs a CUDA GPU; on CPU the verdict is predicted and the capture logic runs against tests/helpers/fake_cuda.py",
    ),
]

@pytest.fixture(autouse=True)
def each_test_leaves_cuda_as_it_found_it():
    """On the H100 one test's failed capture (torch.cuda.graph's __exit__ raising before it restored
    the stream and ended allocation to the pool) made later tests fail in unrelated ways (inductor's
    compile, reduce-overhead). Each test starts from a reset dynamo and must leave no capture behind."""
    torch._dynamo.reset()
    yield
    assert not torch.cuda.is_current_stream_capturing(), "a test left a CUDA-graph capture under way"
    assert torch.cuda.current_stream() == torch.cuda.default_stream(), "a test left a capture's side stream current"


CASES = ["mlp.py", "convnet_bn.py", "cpu_roundtrip.py", "mutate_input.py", "view_outputs.py", "transformer.py"]


@pytest.mark.parametrize("name", CASES)
def test_cudagraphs_backend_skips_agree(name):
    """The prediction for backend="cudagraphs" is made from that backend's own trace, as
    ``graphtool cudagraphs --backend cudagraphs`` makes it (tests/helpers/verdicts.py), not from the
    inductor trace judged by the cudagraphs rules."""
    from torch._dynamo.utils import counters

    from graphtool.capture.user.script import load_model
    from tests.helpers import example
    from tests.helpers.verdicts import cudagraphs_backend_verdict

    predicted = cudagraphs_backend_verdict(example(name))
    spec = load_model(example(name))
    if isinstance(spec.model, torch.nn.Module):
        spec.model.cuda()
    args = tuple(a.cuda() if isinstance(a, torch.Tensor) else a for a in spec.args)
    torch._dynamo.reset()
    counters.clear()
    out = torch.compile(spec.model, backend="cudagraphs")(*args, **spec.kwargs)
    torch.cuda.synchronize()
    skipped = counters["inductor"]["cudagraph_skips"] > 0
    assert skipped == (not predicted.eligible), (name, predicted.summary())
    del out
    torch._dynamo.reset()  # leave no compiled state (or cudagraph trees) to the tests after this one


# The examples the verdict calls capturable; view_outputs has no parameters, so no backward.
CAPTURABLE = [(name, backward) for name in ("mlp.py", "convnet_bn.py", "transformer.py") for backward in (False, True)]
CAPTURABLE.append(("view_outputs.py", False))


@pytest.mark.parametrize("name, backward", CAPTURABLE)
def test_capture_and_replay_match_eager(name, backward):
    """Every model the verdict calls capturable replays with eager's outputs (and gradients) on fresh
    inputs copied into the captured buffers, not only on the inputs it was captured with."""
    from dataclasses import replace

    from graphtool.capture.bench.modes import _clone_inputs, compare, cuda_graph_step, frozen_result, input_sets, make_step
    from graphtool.capture.tensors import map_tensors
    from graphtool.capture.user.script import load_model
    from tests.helpers import example

    spec = load_model(example(name))
    if isinstance(spec.model, torch.nn.Module):
        spec.model.cuda()
    spec = replace(spec, args=map_tensors(spec.args, lambda t: t.detach().cuda().requires_grad_(t.requires_grad)))
    sets = input_sets(torch, spec, 3)
    step = make_step(torch, spec.model, spec.model, backward)
    replay, _, _ = cuda_graph_step(torch, step, *_clone_inputs(torch, sets[0]))
    for fresh in sets[1:]:
        expected = frozen_result(step(*fresh))  # eager, on the fresh inputs
        ok, diff = compare(torch, expected, replay(*fresh))
        assert ok, diff


def test_uncapturable_model_really_fails_capture():
    from graphtool.capture.bench.modes import cuda_graph_step, make_step
    from graphtool.capture.user.script import load_model
    from tests.helpers import example

    spec = load_model(example("item_branch.py"))
    spec.model.cuda()
    args = tuple(a.cuda() for a in spec.args)
    with pytest.raises(RuntimeError, match="captur"):  # "operation not permitted when stream is capturing"
        cuda_graph_step(torch, make_step(torch, spec.model, spec.model, False), args, {})


def test_a_failed_capture_keeps_the_other_modes():
    """After a capture that fails (a host sync), CUDA still works and reduce-overhead still runs."""
    from dataclasses import replace

    from graphtool.capture.bench.modes import run_modes
    from graphtool.capture.tensors import map_tensors
    from graphtool.capture.user.script import load_model
    from tests.helpers import example

    spec = load_model(example("item_branch.py"))
    spec.model.cuda()
    spec = replace(spec, args=map_tensors(spec.args, lambda t: t.cuda()))
    results = {r.name: r for r in run_modes(spec, compile_mode="none", cudagraphs=True, warmup=1, iters=3, repeat=1)}
    replay = results["cudagraph replay"]
    assert replay.status == "error" and "capture failed" in replay.reason
    assert "not permitted when stream is capturing" in replay.reason  # the real cause, not capture_end's
    assert results["eager"].status == "ok", results["eager"].reason
    assert results["compile[reduce-overhead]"].status == "ok", results["compile[reduce-overhead]"].reason
    # nothing of the failed capture is left: not capturing, back on the default stream
    assert not torch.cuda.is_current_stream_capturing()
    assert torch.cuda.current_stream() == torch.cuda.default_stream()


def test_bench_cli_on_gpu(cli):
    import json

    from tests.helpers import example

    rc, out, _ = cli("bench", example("mlp.py"), "--cudagraphs", "--backward", "--iters", "5", "--repeat", "2",
                     "--format", "json")
    data = json.loads(out)
    modes = {m["name"]: m for m in data["modes"]}
    assert rc == 0 and data["device"] == torch.cuda.get_device_name()
    assert list(modes) == ["eager", "compile[default]", "cudagraph replay", "compile[reduce-overhead]"]
    assert all(m["status"] == "ok" for m in modes.values()), modes
    assert modes["cudagraph replay"]["graph_pool_bytes"] > 0 and modes["eager"]["peak_memory_bytes"] > 0
    assert [i["code"] for i in data["insights"]] == ["reduce_overhead_gap"]

    rc, out, _ = cli("bench", example("item_branch.py"), "--cudagraphs", "--compile", "none", "--iters", "2",
                     "--repeat", "1", "--format", "json")
    replay = {m["name"]: m for m in json.loads(out)["modes"]}["cudagraph replay"]
    assert rc == 0 and replay["status"] == "skipped" and "item_branch.py:" in replay["reason"]


def test_bench_times_a_dropout_model_in_every_mode_on_gpu(cli):
    """On the H100 a GPT-2 in training timed nothing but eager (every other mode "mismatch"): now
    each mode is checked with dropout off and timed with dropout on."""
    import json

    from tests.helpers import FIXTURES

    rc, out, _ = cli("bench", FIXTURES / "dropout_train.py", "--cudagraphs", "--backward", "--iters", "5",
                     "--repeat", "2", "--format", "json")
    data = json.loads(out)
    assert rc == 0 and [m["status"] for m in data["modes"]] == ["ok"] * 4, data["modes"]
    assert data["random_ops"]["check"] == "dropout off" and all(m["median_ms"] for m in data["modes"])


def test_a_session_of_a_model_on_the_gpu_traces_it_once():
    """On the GPU the model is its own stand-in: trace, mutations, devices and cudagraphs of one session read one
    three-step trace (trace and mutations its first step), and trace answers what a one-step trace answers
    (tests/api/test_session.py checks the same path on CPU, the model taken for a GPU's)."""
    import graphtool
    from graphtool.capture.user.script import load_model
    from graphtool.commands.session import Session
    from tests.helpers import example

    spec = load_model(example("mlp.py"))
    model, args = spec.model.cuda(), tuple(a.cuda() for a in spec.args)
    alone = graphtool.trace(model, *args).to_dict()  # one question: a one-step trace
    steps = []
    real = Session.trace_spec

    def counted(self, spec, **options):
        steps.append(options.get("steps", 1))
        return real(self, spec, **options)

    Session.trace_spec = counted
    try:
        with graphtool.load(model, *args) as s:
            assert s.trace().to_dict() == alone
            s.mutations(), s.devices()
            assert s.cudagraphs().report.eligible  # mlp.py: recorded on the GPU (docs/gpu-results.md)
    finally:
        Session.trace_spec = real
    assert steps == [3]
