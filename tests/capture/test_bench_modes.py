"""graphtool bench: statistics with an injected timer, checks against eager, and the CPU path."""

from __future__ import annotations

import json

import pytest
import torch

from graphtool.analysis.timing_stats import speedup, summarize
from graphtool.capture.bench.modes import compare, input_sets, make_step, run_modes
from graphtool.capture.bench.timers import measure
from graphtool.capture.user.script import load_model
from tests.helpers import FIXTURES, example


class ScriptedTimer:
    """A fake clock: each stop() returns the next scripted number of milliseconds."""

    def __init__(self, elapsed_ms):
        self.elapsed = list(elapsed_ms)
        self.starts = 0

    def start(self):
        self.starts += 1

    def stop(self):
        return self.elapsed.pop(0)


def test_summary_statistics():
    s = summarize([2.0, 1.0, 3.0])
    assert (s.median_ms, s.min_ms, s.max_ms) == (2.0, 1.0, 3.0)
    assert s.spread_pct == pytest.approx(100.0)
    with pytest.raises(ValueError):
        summarize([])


def test_measure_warms_up_then_times_each_repeat_per_iteration():
    calls = []
    timer = ScriptedTimer([100.0, 110.0, 90.0])
    samples = measure(calls.append, timer, warmup=5, iters=10, repeat=3)
    assert calls == list(range(35))  # warm-up calls count too: input rotation keeps going
    assert timer.starts == 3
    assert samples == (10.0, 11.0, 9.0)
    stats = summarize(list(samples))
    assert stats.median_ms == 10.0 and stats.spread_pct == pytest.approx(20.0)


def test_measure_rejects_bad_counts():
    with pytest.raises(ValueError):
        measure(lambda i: None, ScriptedTimer([]), warmup=0, iters=0, repeat=1)


def test_speedup():
    assert speedup(summarize([2.0]), summarize([0.5])) == 4.0
    assert speedup(None, summarize([1.0])) is None


def test_input_sets_rotate_fresh_values_of_the_same_shape():
    spec = load_model(example("transformer.py"))
    sets = input_sets(torch, spec, 4)
    tokens = [s[0][0] for s in sets]
    assert all(t.shape == tokens[0].shape and t.dtype == tokens[0].dtype for t in tokens)
    assert tokens[0] is spec.args[0] and not torch.equal(tokens[0], tokens[1])
    assert int(max(t.max() for t in tokens)) < 100  # integer inputs stay in the range the model saw


def test_compare_flags_a_mismatch():
    a = torch.ones(3)
    assert compare(torch, (a,), (a + 1e-6,))[0]
    ok, diff = compare(torch, (a,), (a + 1,))
    assert not ok and diff == pytest.approx(1.0)
    assert not compare(torch, (a,), (a, a))[0]


def test_backward_step_returns_gradients():
    spec = load_model(example("mlp.py"))
    out, grads = make_step(torch, spec.model, spec.model, True)(spec.args, spec.kwargs)
    assert len(grads) == 4 and all(g is not None for g in grads)


def test_run_modes_on_cpu_with_injected_timer():
    spec = load_model(example("mlp.py"))
    results = run_modes(spec, compile_mode="aot_eager", warmup=1, iters=2, repeat=3,
                        timer_factory=lambda: ScriptedTimer([4.0, 4.0, 4.0]))
    assert [r.name for r in results] == ["eager", "compile[aot_eager]"]
    assert all(r.status == "ok" and summarize(list(r.samples_ms)).median_ms == 2.0 for r in results)


def test_a_mode_that_differs_from_eager_is_not_timed(monkeypatch):
    import graphtool.capture.bench.modes as br

    spec = load_model(example("mlp.py"))
    monkeypatch.setattr(br, "_compiled", lambda torch, model, mode: (lambda x: model(x) + 1.0))
    results = run_modes(spec, compile_mode="aot_eager", warmup=0, iters=1, repeat=1)
    bad = results[1]
    assert bad.status == "mismatch" and bad.samples_ms is None and "not timed" in bad.reason


def test_a_failing_mode_keeps_the_others(monkeypatch):
    import graphtool.capture.bench.modes as br

    def boom(torch, model, mode):
        raise RuntimeError("backend exploded")

    monkeypatch.setattr(br, "_compiled", boom)
    results = run_modes(load_model(example("mlp.py")), compile_mode="aot_eager", warmup=0, iters=1, repeat=1)
    assert [r.status for r in results] == ["ok", "error"] and "backend exploded" in results[1].reason


def test_bench_json_on_cpu(cli):
    rc, out, _ = cli("bench", example("mlp.py"), "--compile", "aot_eager", "--iters", "5", "--repeat", "2",
                     "--warmup", "1", "--backward", "--format", "json")
    data = json.loads(out)
    assert rc == 0 and data["device"] == "cpu" and data["settings"]["backward"] is True
    names = [m["name"] for m in data["modes"]]
    assert names == ["eager", "compile[aot_eager]"]
    assert data["modes"][0]["speedup_vs_eager"] == 1.0 and len(data["modes"][1]["samples_ms"]) == 2


@pytest.mark.slow  # over 8 s: the slow tier (docs/ci.md)
def test_bench_default_compile_backend(cli):
    """The real default (inductor) on CPU: slow to compile, so one test."""
    rc, out, _ = cli("bench", example("mlp.py"), "--iters", "3", "--repeat", "1", "--warmup", "1", "--format", "json")
    data = json.loads(out)
    assert rc == 0 and data["modes"][1]["name"] == "compile[default]" and data["modes"][1]["status"] == "ok"


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the path for machines without CUDA")
def test_cudagraphs_without_cuda_measures_then_exits_2(cli):
    rc, out, err = cli("bench", example("mlp.py"), "--cudagraphs", "--compile", "aot_eager", "--iters", "3", "--repeat", "1", "--format", "json")
    data = json.loads(out)
    assert rc == 2 and "no CUDA device is present" in err
    assert [m["status"] for m in data["modes"]] == ["ok", "ok", "skipped", "skipped"]
    assert data["cudagraphs_verdict"]["backend"] == "cudagraphs"


def test_bad_bench_options(cli):
    rc, _, err = cli("bench", example("mlp.py"), "--iters", "0")
    assert rc == 2 and "--iters and --repeat must be 1 or more" in err


def test_trace_report_can_carry_the_bench(cli):
    rc, out, _ = cli("trace", example("mlp.py"), "--bench", "--format", "json")
    data = json.loads(out)
    assert rc == 0 and [m["name"] for m in data["bench"]["modes"]] == ["eager", "compile[default]"]


def test_backward_with_nothing_to_differentiate_is_a_clear_error(cli):
    rc, out, err = cli("bench", example("view_outputs.py"), "--backward", "--compile", "none", "--iters", "1")
    assert rc == 2 and out == ""
    assert "view_outputs.py:14: --backward: no output of the model requires grad" in err and "drop --backward" in err


def test_a_dropout_model_is_checked_with_dropout_off_then_timed_with_it_on(cli):
    """Dropout in training mode: inductor draws other random numbers than eager. On the H100 every mode
    but eager was "mismatch" on a GPT-2 and nothing else was timed. Now each mode is compared with eager
    with dropout off (the model's F.dropout called with p=0), then timed as written; the JSON and the
    table say which random op was drawn at which line and how the check was made."""
    rc, out, _ = cli("bench", FIXTURES / "dropout_train.py", "--iters", "1", "--repeat", "1", "--backward",
                     "--format", "json")
    data = json.loads(out)
    eager, compiled = data["modes"]
    assert rc == 0 and compiled["name"] == "compile[default]" and compiled["status"] == "ok"
    assert compiled["median_ms"] is not None and compiled["check"] == eager["check"] == "dropout off"
    random = data["random_ops"]
    assert random["check"] == "dropout off" and random["still_drawn"] == {}
    assert any(op.startswith("bernoulli") and where.endswith("dropout_train.py:12") for op, where in random["drawn"].items())
    assert "dropout functions called with p=0" in random["turned_off"]


def test_the_table_says_how_a_random_model_was_checked(cli):
    rc, out, _ = cli("bench", FIXTURES / "dropout_train.py", "--compile", "aot_eager", "--iters", "1", "--repeat", "1")
    text = " ".join(out.split())
    assert rc == 0 and "random ops: the model draws random numbers (bernoulli" in text
    assert "checked against eager with dropout off (dropout functions called with p=0" in text and "timed as written, dropout on" in text


def test_dropout_off_turns_off_modules_functions_and_attention_dropout_then_puts_them_back():
    from graphtool.capture.bench.modes import dropout_off

    F = torch.nn.functional
    model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.Dropout(0.5), torch.nn.Dropout2d(0.2))
    originals = (F.dropout, torch.dropout, F.scaled_dot_product_attention)
    x = torch.ones(64, 4)
    q = torch.randn(1, 2, 3, 4)
    with dropout_off(torch, model) as turned_off:
        assert (model[1].p, model[2].p) == (0.0, 0.0)
        assert torch.equal(F.dropout(x, 0.9, True), x) and torch.equal(F.dropout(x), x)
        assert torch.equal(torch.dropout(x, 0.9, True), x)
        plain = originals[2](q, q, q)
        assert torch.allclose(F.scaled_dot_product_attention(q, q, q, dropout_p=0.9), plain)
        assert torch.allclose(F.scaled_dot_product_attention(q, q, q, None, 0.9), plain)
    assert (model[1].p, model[2].p) == (0.5, 0.2) and (F.dropout, torch.dropout, F.scaled_dot_product_attention) == originals
    assert turned_off[0] == "2 dropout modules (p=0.2, 0.5) set to p=0"
    assert not torch.equal(F.dropout(x, 0.9, True), x)


def test_random_ops_that_are_not_dropout_leave_a_differing_mode_timed_and_marked_unchecked(monkeypatch):
    """torch.randn in forward cannot be turned off: a mode that then differs is timed anyway (never no
    numbers), marked unchecked, and the reason names the op and the line."""
    import graphtool.capture.bench.modes as br

    def compiled(torch, model, mode):
        def run(x):
            torch.rand(3)  # draws first, so the model's own noise differs from eager's
            return model(x)
        return run

    monkeypatch.setattr(br, "_compiled", compiled)
    eager, mode = run_modes(load_model(str(FIXTURES / "noise_train.py")), compile_mode="aot_eager", warmup=0, iters=1,
                            repeat=1)
    assert mode.status == "unchecked" and mode.samples_ms and mode.check is None
    assert "timed, but not checked" in mode.reason and "randn" in mode.reason and "noise_train.py:12" in mode.reason
    assert eager.random_ops["still_drawn"] and eager.random_ops["check"] == "dropout off"


def test_a_real_mismatch_with_dropout_off_is_still_a_mismatch(monkeypatch):
    import graphtool.capture.bench.modes as br

    monkeypatch.setattr(br, "_compiled", lambda torch, model, mode: (lambda x: model(x) + 1.0))
    _, bad = run_modes(load_model(str(FIXTURES / "dropout_train.py")), compile_mode="aot_eager", warmup=0, iters=1,
                       repeat=1)
    assert bad.status == "mismatch" and bad.samples_ms is None
    assert "compared with dropout off, so the model's random ops (bernoulli" in bad.reason


@pytest.mark.slow
def test_a_transformers_gpt2_in_training_is_timed_in_every_mode(cli):
    """examples/hf_gpt2.py trains with dropout (modules and the attention's dropout_p): checked with
    dropout off, every mode timed."""
    pytest.importorskip("transformers")
    rc, out, _ = cli("bench", example("hf_gpt2.py"), "--compile", "aot_eager", "--backward", "--iters", "1",
                     "--repeat", "1", "--warmup", "0", "--format", "json")
    data = json.loads(out)
    assert rc == 0 and [m["status"] for m in data["modes"]] == ["ok", "ok"], data["modes"]
    assert data["random_ops"]["turned_off"][0].endswith("dropout modules (p=0.1) set to p=0")
    assert data["random_ops"]["still_drawn"] == {}  # attention with dropout_p=0 draws nothing


@pytest.mark.parametrize("backward", [False, True])
def test_a_model_with_torch_cond_is_benched(cli, backward):
    """torch.cond is a higher-order op: graphtool's random-op mode raised NotImplementedError on it
    ("no rule registered for HigherOrderOperator cond"), reported as the user's error with exit 2."""
    rc, out, err = cli("bench", FIXTURES / "hop" / "cond_model.py", "--compile", "aot_eager", "--iters", "1",
                       "--repeat", "1", "--warmup", "0", "--format", "json", *(["--backward"] * backward))
    data = json.loads(out)
    assert rc == 0 and [m["status"] for m in data["modes"]] == ["ok", "ok"], err
    assert data["random_ops"] is None


def test_torch_cond_under_the_random_op_mode_runs_through_it_in_inference():
    """Forward only: the mode sees cond and lets it run; no second run is needed."""
    from graphtool.capture.bench.modes import _with_random_ops

    spec = load_model(str(FIXTURES / "hop" / "cond_model.py"))
    restored = []
    with torch.no_grad():
        out, drawn = _with_random_ops(torch, lambda: spec.model(*spec.args), lambda: restored.append(1))
    assert out.shape == (4, 8) and drawn == {} and restored == []


@pytest.mark.filterwarnings("ignore:.*flex_attention called without torch.compile")
def test_flex_attention_and_map_pass_through_the_random_op_mode():
    """Other higher-order ops take the same path as torch.cond; random ops outside them are still named."""
    from torch._higher_order_ops.map import map as hop_map
    from torch.nn.attention.flex_attention import flex_attention

    from graphtool.capture.bench.modes import _with_random_ops

    q = torch.randn(1, 2, 16, 8)
    out, drawn = _with_random_ops(torch, lambda: flex_attention(q, q, q), lambda: None)
    assert out.shape == q.shape and drawn == {}
    out, drawn = _with_random_ops(torch, lambda: hop_map(lambda x: x.sin(), torch.rand(3, 4)), lambda: None)
    assert out.shape == (3, 4) and list(drawn) == ["rand"]


def test_torch_cond_with_dropout_in_training_is_found_by_the_generator_state():
    """Backward through a cond that ran under any dispatch mode fails inside torch (its own
    FlopCounterMode too): graphtool runs the step again without the mode, and the generator's state
    says random numbers were drawn; the modes are then checked with dropout off."""
    from graphtool.capture.bench.modes import _UNNAMED_RANDOM

    eager, compiled = run_modes(load_model(str(FIXTURES / "hop" / "cond_dropout.py")), compile_mode="aot_eager",
                                backward=True, warmup=0, iters=1, repeat=1)
    assert eager.random_ops["drawn"] == {_UNNAMED_RANDOM: None} and eager.random_ops["still_drawn"] == {}
    assert compiled.status == "ok" and compiled.check == "dropout off"


def test_an_error_names_torchs_real_cause_not_the_wrappers_first_line(monkeypatch):
    """On the H100, compile[default] read only "BackendCompilerFailed: backend='inductor' raised:"."""
    import graphtool.capture.bench.modes as br

    class BackendCompilerFailed(Exception):
        def __init__(self, inner):
            super().__init__(f"backend='inductor' raised:\n{type(inner).__name__}: {inner}\n\nSet TORCHDYNAMO_VERBOSE=1")
            self.inner_exception = inner

    def boom(torch, model, mode):
        raise BackendCompilerFailed(RuntimeError("CUDA error: operation not permitted when stream is capturing"))

    monkeypatch.setattr(br, "_compiled", boom)
    _, bad = run_modes(load_model(example("mlp.py")), compile_mode="aot_eager", warmup=0, iters=1, repeat=1)
    assert bad.status == "error"
    assert bad.reason == ("BackendCompilerFailed: backend='inductor' raised: "
                          "RuntimeError: CUDA error: operation not permitted when stream is capturing")


def test_gradient_mismatch_is_named_as_such():
    from graphtool.capture.bench.modes import check_against_eager

    out, grad = torch.ones(2), torch.ones(3)
    assert check_against_eager(torch, (out, [grad]), (out, [grad])) == (True, 0.0, "output")
    ok, diff, which = check_against_eager(torch, (out, [grad]), (out, [grad * 3]))
    assert (ok, which) == (False, "gradients") and diff == pytest.approx(2.0)


def test_rotated_inputs_keep_layout_and_handle_empty_and_bool_tensors():
    from graphtool.capture.user.script import ModelSpec

    image = torch.randn(2, 3, 4, 4).to(memory_format=torch.channels_last)
    ids, empty, mask = torch.tensor([3, 5, 7]), torch.zeros(0, dtype=torch.long), torch.tensor([True, False])
    spec = ModelSpec(path=None, entry="x", model=lambda *a: a, args=(image, ids, empty, mask))
    sets = input_sets(torch, spec, 3)
    for args, _ in sets[1:]:
        assert args[0].is_contiguous(memory_format=torch.channels_last) and not torch.equal(args[0], image)
        assert 3 <= int(args[1].min()) and int(args[1].max()) <= 7
        assert args[2].shape == (0,) and torch.equal(args[3], mask)


@pytest.mark.parametrize("device, message", [
    ("meta", "--device meta: bench times real work, on cpu or cuda"),
    ("bogus", "--device 'bogus' is not a torch device"),
])
def test_bad_bench_device(cli, device, message):
    rc, out, err = cli("bench", example("mlp.py"), "--device", device, "--compile", "none", "--iters", "1")
    assert rc == 2 and out == "" and message in err


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the path for machines without CUDA")
def test_bench_device_cuda_without_cuda(cli):
    rc, out, err = cli("bench", example("mlp.py"), "--device", "cuda", "--compile", "none", "--iters", "1")
    assert rc == 2 and out == "" and "--device cuda: no CUDA device is present" in err and "drop --device" in err


def test_bench_device_choice(monkeypatch):
    from graphtool.commands.bench import _run_device
    from graphtool.errors import UsageError

    assert _run_device(torch, "cpu", False) == torch.device("cpu")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    assert _run_device(torch, None, True) == torch.device("cuda", 0)
    assert _run_device(torch, "cuda", True) == torch.device("cuda", 0)
    with pytest.raises(UsageError, match="this machine has 1 CUDA device"):
        _run_device(torch, "cuda:1", False)
    with pytest.raises(UsageError, match="--cudagraphs captures on a CUDA device, but --device cpu"):
        _run_device(torch, "cpu", True)


def _bench_schema():
    from importlib import resources

    return json.loads(resources.files("graphtool.schema").joinpath("bench.schema.json").read_text())


def test_bench_json_validates_against_its_schema(cli):
    import jsonschema

    from tests.helpers import FIXTURES

    runs = [
        (example("mlp.py"), "--compile", "aot_eager", "--backward"),
        (FIXTURES / "dropout_train.py",),  # a mismatch: untimed mode with nulls
        (example("mlp.py"), "--compile", "aot_eager", "--cudagraphs"),  # skipped replay + verdict (exit 2 on CPU)
    ]
    for args in runs:
        rc, out, _ = cli("bench", *args, "--iters", "2", "--repeat", "1", "--warmup", "0", "--format", "json")
        data = json.loads(out)
        jsonschema.validate(data, _bench_schema())
        assert data["torch_version"] == torch.__version__ and data["host"]["cpus"] >= 1


def test_trace_bench_key_validates_too(cli):
    import jsonschema

    rc, out, _ = cli("trace", example("mlp.py"), "--bench", "--format", "json")
    jsonschema.validate(json.loads(out)["bench"], _bench_schema())


@pytest.mark.parametrize("script", [example("mutate_input.py"), example("transpose_input.py"),
                                    str(FIXTURES / "stateful_buffer.py")])
def test_models_that_mutate_inputs_or_buffers_are_checked_from_the_same_state(cli, script):
    """Timing runs mutate inputs (add_, t_()) and buffers (a step counter); each check restores them
    first, so the compiled run is compared on eager's data and passes. The forward alone: in training, torch 2.13's
    compiled gradient through the step counter (``fc(x) * self.steps`` after ``self.steps += 1``) is twice eager's,
    a real difference bench reports as a mismatch."""
    rc, out, _ = cli("bench", script, "--compile", "aot_eager", "--iters", "3", "--repeat", "1", "--inference", "--format", "json")
    assert rc == 0 and [m["status"] for m in json.loads(out)["modes"]] == ["ok", "ok"]


def test_snapshot_restores_values_metadata_and_buffers():
    from graphtool.capture.bench.modes import snapshot

    model = torch.nn.BatchNorm1d(3)
    x = torch.randn(2, 3)
    original = x.clone()
    restore = snapshot(torch, model, [((x,), {})])
    x.t_()
    x.add_(1)
    model(torch.randn(4, 3))
    restore()
    assert x.shape == (2, 3) and torch.equal(x, original)
    assert int(model.num_batches_tracked) == 0 and torch.equal(model.running_mean, torch.zeros(3))


def test_table_lists_the_verdict_reasons_with_their_effect(cli):
    rc, out, _ = cli("bench", example("item_branch.py"), "--cudagraphs", "--compile", "none", "--iters", "1",
                     "--repeat", "1")
    text = " ".join(out.split())
    assert "item_branch.py:13: [stops graphtool's capture] graph break: Unsupported Tensor.item()" in text


def test_trace_bench_names_the_device_the_script_used(cli, monkeypatch):
    """trace --bench times the model where the script put it; a CPU model is reported as cpu even
    on a machine with CUDA (before, the GPU's name was printed for CPU timings)."""
    import graphtool.analysis.bench_report as ab
    from graphtool.capture.bench.modes import cuda_device_of
    from graphtool.commands.session import Session

    assert cuda_device_of(load_model(example("mlp.py"))) is None
    assert cuda_device_of(load_model(example("mutate_input.py"))) is None  # a function model
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda *a: "A GPU that was not used")
    seen = {}
    monkeypatch.setattr(ab, "build_bench_report", lambda spec, device, *a, **k: seen.setdefault("device", device))
    Session(example("mlp.py")).bench(in_place=True, compile_mode="none", warmup=0, iters=1, repeat=1)
    assert seen["device"] == "cpu"


def test_attention_without_dropout_is_not_a_random_op():
    """The CPU flash-attention kernel is tagged random whatever its dropout_p; with 0 it draws nothing,
    so a transformers model with dropout off was wrongly left with a random op graphtool "cannot turn off"."""
    from graphtool.capture.bench.modes import _with_random_ops

    q = torch.randn(1, 2, 4, 8)
    F = torch.nn.functional
    _, drawn = _with_random_ops(torch, lambda: F.scaled_dot_product_attention(q, q, q, dropout_p=0.0), lambda: None)
    assert drawn == {}
    _, drawn = _with_random_ops(torch, lambda: F.scaled_dot_product_attention(q, q, q, dropout_p=0.5), lambda: None)
    assert drawn
