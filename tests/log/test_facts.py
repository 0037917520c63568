"""The facts of hand-made logs for what the recorded CPU runs do not show: CUDA-graph skips, ranks that recompile
differently, failed frames, compiles without a graph, several guard failures, compiled autograd's ids."""

from __future__ import annotations

import io

from graphtool.analysis.run_log import read_run_log
from tests.log.handmade import metrics, record, small_log


def facts(*logs: tuple[str, bytes]):
    return read_run_log([(name, io.BytesIO(data)) for name, data in logs])


def test_cudagraph_skip_reasons_forward_and_backward():
    skip = "skipping cudagraphs due to mutated inputs (1 instances). Found from : File \"/app/model.py\", line 9"
    log = small_log() + record("compilation_metrics", metrics("2/0", "step", 30, cudagraph_skip_reason=skip),
                               frame_id=2, frame_compile_id=0, attempt=0)
    log += record("bwd_compilation_metrics", {"compile_id": "2/0", "is_forward": False, "cudagraph_skip_reason": "cpu device",
                                              "backward_cumulative_compile_time_us": 1000}, frame_id=2, frame_compile_id=0,
                  attempt=0)
    f = facts(("x.log", log))
    assert [(s.compile_id, s.frame, s.graph, s.reason) for s in f.cudagraph_skips] == [
        ("2/0", "step", "forward", skip), ("2/0", "step", "backward", "cpu device")]
    from graphtool.commands.log import LogResult
    from tests.helpers.console import render_text

    text = render_text(LogResult(f, ("x.log",)).view(), 80)
    assert "CUDA graphs: 2 graphs skipped" in text and "cpu device" in text


def test_ranks_that_recompile_differently_are_a_desync():
    rank1 = small_log(rank=1) + record(
        "artifact", {"name": "recompile_reasons", "encoding": "json"}, '[\n"0/1: x.size()[0] == 3",\n"0/0: L[\'y\'] == 2"\n]',
        rank=1, frame_id=0, frame_compile_id=2, attempt=0) + record(
        "compilation_metrics", metrics("0/2"), rank=1, frame_id=0, frame_compile_id=2, attempt=0)
    f = facts(("dedicated_log_torch_trace_rank_0_a.log", small_log(rank=0)), ("dedicated_log_torch_trace_rank_1_b.log", rank1))
    (d,) = f.desync
    assert d.kind == "recompiles" and d.message == "ranks recompiled differently (recompiles rank 0: 1; rank 1: 2)"
    last = f.recompiles[-1]
    assert (last.rank, last.compile_id, last.reason, last.reasons) == (1, "0/2", "0/1: x.size()[0] == 3",
                                                                        ("0/1: x.size()[0] == 3", "0/0: L['y'] == 2"))
    assert [r.recompiles for r in f.ranks] == [1, 2]


def test_a_failed_frame_and_a_compile_without_a_graph():
    failed = record("dynamo_start", {"stack": []}, frame_id=5, frame_compile_id=0, attempt=0) + record(
        "compilation_metrics", metrics("5/0", "rnn_step", 40, fail_type="Unsupported", fail_reason="Attempted to wrap RNN\nmore"),
        frame_id=5, frame_compile_id=0, attempt=0)
    empty = record("dynamo_start", {"stack": []}, frame_id=6, frame_compile_id=0, attempt=0) + record(
        "compilation_metrics", metrics("6/0", "noop", 50, graph_op_count=0), frame_id=6, frame_compile_id=0, attempt=0)
    f = facts(("x.log", small_log() + failed + empty))
    outcome = {c.compile_id: c.outcome for c in f.compiles}
    assert outcome["5/0"] == "failed" and outcome["6/0"] == "no graph"
    (s,) = f.skipped_frames
    assert (s.frame, s.line, s.reason, s.recompile_limit) == ("rnn_step", 40, "Attempted to wrap RNN", False)
    assert f.graphs_compiled == 3
    assert (f.calls_captured, f.fallbacks_to_eager) == (6, 1)  # graph_op_count summed; the failed frame fell back


def test_capture_coverage_a_log_cannot_give_is_null_with_why():
    """A compile cut short has no metrics (neither figure); one that failed after its graph reached the backend had
    its calls counted by torch, and its metrics carry no count: null and a note, never a guess."""
    cut = small_log() + record("dynamo_start", {"stack": []}, frame_id=5, frame_compile_id=0, attempt=0)
    f = facts(("x.log", cut))
    assert (f.calls_captured, f.fallbacks_to_eager) == (None, None)
    assert f.notes == ("calls_captured and fallbacks_to_eager not given: compile 5/0 has no compilation_metrics (a log cut "
                       "short, or a process that died compiling)",)
    backend = record("dynamo_output_graph", {"sizes": {}}, "class GraphModule(torch.nn.Module): x", frame_id=5,
                     frame_compile_id=0, attempt=0) + record(
        "compilation_metrics", metrics("5/0", fail_type="BackendCompilerFailed", graph_op_count=None), frame_id=5,
        frame_compile_id=0, attempt=0)
    f = facts(("x.log", cut + backend))
    assert (f.calls_captured, f.fallbacks_to_eager) == (None, 1) and "failed after dynamo handed its graph" in f.notes[0]
    d = f.to_dict()
    assert d["calls_captured"] is None and d["fallbacks_to_eager"] == 1 and d["ranks"][0]["fallbacks_to_eager"] == 1
    assert "calls captured" not in f.summary() and "1 fallback to eager" in f.summary()


def test_compiled_autograd_compile_ids():
    ca = record("dynamo_start", {"stack": []}, compiled_autograd_id=0, frame_id=7, frame_compile_id=0, attempt=0) + record(
        "dynamo_output_graph", {"sizes": {}}, "class GraphModule(torch.nn.Module): ca", compiled_autograd_id=0, frame_id=7,
        frame_compile_id=0, attempt=0) + record("compilation_metrics", metrics("!0/7/0", "compiled_autograd"),
                                                compiled_autograd_id=0, frame_id=7, frame_compile_id=0, attempt=0)
    f = facts(("x.log", small_log() + ca))
    assert "!0/7/0" in {c.compile_id for c in f.compiles} and f.graphs_compiled == 4
