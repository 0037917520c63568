"""The torch symbols graphtool compile reads, on every torch CI runs (tests/capture is a versions path)."""

from __future__ import annotations

import torch

from graphtool.capture import compat


def test_user_backend_is_what_torch_compile_builds():
    inductor = compat.user_backend("inductor", "max-autotune")
    assert type(inductor).__name__ == "_TorchCompileInductorWrapper" and inductor.config.get("max_autotune") is True
    assert callable(compat.user_backend("aot_eager", None))


def test_compile_id_totals_and_metrics_of_a_dynamo_compile():
    seen = []

    def backend(gm, example_inputs):
        seen.append(compat.current_compile_id())
        return gm.forward

    compat.dynamo_reset()
    assert compat.current_compile_id() is None
    before = len(compat.compilation_metrics())
    torch.compile(torch.nn.Linear(2, 2), backend=backend)(torch.ones(1, 2))
    totals = compat.compile_time_totals()  # dynamo's reset clears them: read first
    assert len(compat.compilation_metrics()) >= min(before + 1, 64)
    compat.dynamo_reset()
    assert seen and seen[0].count("/") == 1
    assert totals["total_wall_time"] > 0 and totals["entire_frame_compile"] > 0


def test_trace_marker_and_recompile_limit():
    compat.trace_marker("graphtool_stage", "probe")  # no TORCH_TRACE here: nothing written, no error
    limit = compat.dynamo_flag("recompile_limit")
    with compat.recompile_limit_at_least(limit + 5):
        assert compat.dynamo_flag("recompile_limit") == limit + 5
    assert compat.dynamo_flag("recompile_limit") == limit


def test_nested_compile_region_and_fsdp2_are_found():
    assert callable(compat.nested_compile_region())  # 2.13 and 2.15 both have it
    assert compat.is_fsdp2_module(torch.nn.Linear(2, 2)) is False
