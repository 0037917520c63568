"""Backend-faithful tracing: each backend's own AOT stage, and whose fault a failed trace is."""

from __future__ import annotations

import pytest

from graphtool.capture import compat
from graphtool.capture.tracer import trace_model
from graphtool.capture.user.script import load_model
from graphtool.errors import EXIT_BUG, EXIT_USAGE, GraphtoolBug, TraceFailed
from tests.helpers import FIXTURES, example

BN_CHECKPOINT = str(FIXTURES / "field" / "bn_checkpoint.py")


def _ops(gm) -> set[str]:
    return {str(n.target) for n in gm.graph.nodes if n.op == "call_function"}


def test_inductor_graphs_use_inductors_decompositions():
    """torch.compile's default backend decomposes layer norm (var_mean) where plain AOT keeps native_layer_norm."""
    spec = load_model(example("transformer.py"))
    inductor = trace_model(spec, backend="inductor").regions[0]
    plain = trace_model(load_model(example("transformer.py")), backend="cudagraphs").regions[0]
    assert any("var_mean" in op for op in _ops(inductor.forward))
    assert not any("native_layer_norm" in op for op in _ops(inductor.forward))
    assert any("native_layer_norm" in op for op in _ops(plain.forward))


@pytest.mark.parametrize("backend", ["inductor", "aot_eager"])
def test_batchnorm_inside_checkpoint_traces_like_torch_compile(backend):
    """Problem 2: torch.compile with inductor or aot_eager compiles this and runs backward; so does graphtool."""
    cap = trace_model(load_model(BN_CHECKPOINT), backend=backend)
    assert cap.backend == backend and cap.training
    (region,) = cap.regions
    assert region.forward is not None and region.backward is not None
    mutated = {r.ref.name for r in region.forward_inputs if r.mutated}
    assert mutated == {"block.bn.running_mean", "block.bn.running_var", "block.bn.num_batches_tracked"}


def test_cudagraphs_backend_fails_as_torch_does():
    """torch.compile(backend="cudagraphs") itself fails on this model's backward: exit 2, torch's message."""
    with pytest.raises(TraceFailed) as info:
        trace_model(load_model(BN_CHECKPOINT), backend="cudagraphs")
    assert info.value.exit_code == EXIT_USAGE and "modified by an inplace operation" in info.value.message
    # the stage that failed; not placed at the factory's def line (get_model_and_inputs, line 30), which did not fail
    assert "(it runs eagerly; AOT autograd failed)" in info.value.message
    assert not info.value.message.startswith(f"{BN_CHECKPOINT}:30:")
    # no user frame in AOT's backward: the model's forward that torch traced (line 24), not the bare path
    assert info.value.message.startswith(f"{BN_CHECKPOINT}:24: ")
    # torch.compile(backend="aot_eager") runs it: said, with the stage that failed
    assert info.value.hint.startswith("--backend aot_eager traces it: the failure is in cudagraphs's own stage (AOT autograd)")
    # what AOT had found before the failure is still reported: the forward's mutations
    assert info.value.detail == ("before it failed, AOT autograd found that the forward mutates 3 inputs: "
                                 "block.bn.num_batches_tracked (buffer, data), block.bn.running_mean (buffer, data), "
                                 "block.bn.running_var (buffer, data)")


@pytest.mark.parametrize("standin", [False, True])
def test_graphtools_own_failure_while_tracing_is_a_bug_in_graphtool(monkeypatch, standin):
    """Was, on the stand-in (``cudagraphs``): "torch.compile could not trace the model (it runs eagerly)",
    exit 2, for an exception raised in graphtool's own backend code. Innermost frame in graphtool/: exit 3,
    graphtool's frames shown, and no second compile to find out whose fault it is."""
    import operator

    from graphtool.capture import tracer
    from graphtool.capture.standin.meta import to_meta

    # a builtin raising from graphtool's own line: the innermost Python frame is graphtool's backend
    monkeypatch.setattr(tracer, "_in_place_writes", operator.itemgetter("x"))
    monkeypatch.setattr(tracer, "_torch_compiles", lambda *a: pytest.fail("a bug in graphtool needs no second compile"))
    spec = load_model(example("mlp.py"))
    with pytest.raises(GraphtoolBug) as info:
        trace_model(to_meta(spec) if standin else spec, standin=standin)
    err = info.value
    assert err.exit_code == EXIT_BUG and "could not trace" not in err.message
    assert err.message.startswith("graphtool failed while tracing") and "TypeError" in err.message
    assert 'graphtool/capture/tracer.py", line' in err.detail and "_in_place_writes(gm)" in err.detail
    assert "bug in graphtool" in err.hint


def test_a_trace_that_fails_where_torch_compile_succeeds_is_graphtools_bug(monkeypatch):
    def broken(*a, **k):
        raise RuntimeError("graphtool's own capture broke")

    monkeypatch.setattr(compat, "run_aot_stage", broken)
    with pytest.raises(GraphtoolBug) as info:
        trace_model(load_model(example("mlp.py")), backend="aot_eager")
    assert info.value.exit_code == EXIT_BUG
    assert "torch.compile(backend='aot_eager') compiles and runs" in info.value.message


@pytest.mark.parametrize("backend", compat.AOT_BACKENDS)
def test_every_backend_names_its_view(backend):
    from graphtool.analysis.trace_report import build_trace_report

    report = build_trace_report(trace_model(load_model(example("mlp.py")), backend=backend))
    assert report.to_dict()["model"]["backend"] == backend
