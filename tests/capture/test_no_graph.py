"""A run that compiled no graph says why, and each cause is checked against what torch itself did."""

from __future__ import annotations

import logging

import pytest
import torch

from graphtool.capture import compat
from graphtool.capture.compat import STRUCTURED_TRACE_LOGGER
from graphtool.capture.graph_breaks import BreakRecorder, FrameEvent, parse_break
from graphtool.capture.no_graph import CompileSeen, no_graph_cause
from graphtool.capture.processes.lint_job import LintJob
from graphtool.capture.processes.lint_worker import lint_one
from tests.helpers import FIXTURES, needs_whole_forward_skip

BREAKS = FIXTURES / "breaks"


def _unique_graphs() -> int:
    """torch's own count of the graphs dynamo captured (``counters["stats"]["unique_graphs"]``)."""
    from torch._dynamo.utils import counters

    return counters["stats"]["unique_graphs"]


# -- compat functions this feature added ---------------------------------------------------------


def test_compiler_stance_follows_set_stance():
    assert compat.compiler_stance() == "default"
    with torch.compiler.set_stance("force_eager"):
        assert compat.compiler_stance() == "force_eager"
    assert compat.compiler_stance() == "default"


def test_tracing_stack_is_the_frame_dynamo_traces_at_its_line():
    def f(x):
        y = x.sin()
        print("break")  # dynamo handles this break in f, at this line
        return y

    seen = []

    class OnBreak(logging.Handler):
        def emit(self, record):
            meta = getattr(record, "metadata", None)
            if isinstance(meta, dict) and meta.get("artifact", {}).get("name") == "dynamo_graph_break_reason":
                seen.append(compat.tracing_stack())

    assert compat.tracing_stack() == []  # outside a trace
    handler = OnBreak(level=logging.DEBUG)
    with BreakRecorder():  # sets the trace logger's level; the handler below listens alongside
        logging.getLogger(STRUCTURED_TRACE_LOGGER).addHandler(handler)
        try:
            torch._dynamo.reset()
            torch.compile(f, backend="eager")(torch.randn(2))
        finally:
            logging.getLogger(STRUCTURED_TRACE_LOGGER).removeHandler(handler)
    (stack,) = seen
    assert stack[-1] == (__file__, f.__code__.co_firstlineno + 2, "f")


# -- each cause, with torch's own fact beside it ---------------------------------------------------


def test_torchdynamo_disable_env(monkeypatch):
    monkeypatch.setenv("TORCHDYNAMO_DISABLE", "1")

    def f(x):
        return x + 1

    assert torch.compile(f) is f  # torch's fact: optimize() hands the function back untouched
    result = lint_one(LintJob(str(BREAKS / "sequential.py"), reset=True))
    assert result.graph_count == 0
    assert result.no_graph == "TORCHDYNAMO_DISABLE=1 is set: torch.compile returns the model unchanged"


def test_torch_compile_disable_env(monkeypatch):
    # torch reads TORCH_COMPILE_DISABLE once, at import, into config.disable: set both as a fresh process would
    monkeypatch.setenv("TORCH_COMPILE_DISABLE", "1")
    before = _unique_graphs()
    with torch._dynamo.config.patch(disable=True):
        result = lint_one(LintJob(str(BREAKS / "sequential.py"), reset=True))
    assert _unique_graphs() == before  # torch captured nothing
    assert result.graph_count == 0
    assert result.no_graph.startswith("TORCH_COMPILE_DISABLE=1 is set (torch._dynamo.config.disable)")


def test_config_disable_set_in_code(monkeypatch):
    monkeypatch.delenv("TORCH_COMPILE_DISABLE", raising=False)
    with torch._dynamo.config.patch(disable=True):
        assert no_graph_cause(BreakRecorder()) == "torch._dynamo.config.disable is True: dynamo skips every frame"


def test_force_eager_stance():
    before = _unique_graphs()
    with torch.compiler.set_stance("force_eager"):
        result = lint_one(LintJob(str(BREAKS / "sequential.py"), reset=True))
    assert _unique_graphs() == before
    assert result.graph_count == 0 and "set_stance(\"force_eager\")" in result.no_graph


def test_script_that_replaces_torch_compile_as_a_model(monkeypatch):
    monkeypatch.setattr(torch, "compile", torch.compile)  # the fixture replaces it on import: restore after
    result = lint_one(LintJob(str(BREAKS / "patch_compile.py"), reset=True))
    assert torch.compile.__name__ == "no_compile"  # the script's own function is what torch.compile is now
    assert result.graph_count == 0
    assert result.no_graph.startswith("torch.compile was replaced by no_compile (")
    assert "patch_compile.py:6)" in result.no_graph


def test_script_that_replaces_torch_compile_under_run():
    original = torch.compile
    result = lint_one(LintJob(str(BREAKS / "patch_compile.py"), run=True, reset=True))
    assert torch.compile is original  # lint --run puts torch's back
    assert result.graph_count == 0 and result.no_graph.startswith("torch.compile was replaced by no_compile")


@needs_whole_forward_skip(str(BREAKS / "lstm.py"))
def test_forward_skipped_names_the_frame_reason_and_line():
    result = lint_one(LintJob(str(BREAKS / "lstm.py"), reset=True))
    assert result.graph_count == 0
    assert result.no_graph.startswith("dynamo skipped forward (")
    assert "lstm.py:12) and ran it eagerly: Attempted to wrap RNN, GRU, or LSTM (at " in result.no_graph
    assert result.no_graph.endswith("lstm.py:13)")


def test_no_compile_event_at_all():
    seen = CompileSeen(expected=torch.compile, found=torch.compile, calls=1)
    assert no_graph_cause(BreakRecorder(), seen, environ={}).startswith("dynamo compiled no frame")


def test_script_that_never_calls_torch_compile():
    seen = CompileSeen(expected=torch.compile, found=torch.compile, calls=0)
    assert no_graph_cause(BreakRecorder(), seen, environ={}) == "the script never called torch.compile"


# -- both of torch's paths for one skipped frame count once ---------------------------------------

# convert_frame.py's wording for an Unsupported it did not log itself (only while TORCH_LOGS=graph_breaks)
RESUME_SKIP = (
    "Graph break: torch.compile cannot properly resume from this graph break, which results in a skip.\n"
    "torch.compile will skip tracing the frame f (/app/m.py line 4) and fall back to eager.\n"
    "The graph break occurred in the following user code:\n"
    '  File "/app/m.py", line 7, in f\n    y = g(x)\n\n'
    "Traceback (most recent call last):\n"
    '  File "/venv/lib/python3.11/site-packages/torch/_dynamo/convert_frame.py", line 2102, in _compile\n'
    "torch._dynamo.exc.Unsupported: Dynamo recompile limit exceeded\n"
)


def test_convert_frame_skip_record_is_parsed():
    b = parse_break(RESUME_SKIP, compile_id="0/1")
    assert (b.skipped_function, b.skipped_file, b.skipped_line) == ("f", "/app/m.py", 4)
    assert (b.file, b.line, b.reason, b.skips_frame) == ("/app/m.py", 7, "Dynamo recompile limit exceeded", True)


def test_one_frame_on_both_paths_counts_once():
    rec = BreakRecorder()
    rec.skip_notes.append(parse_break(RESUME_SKIP, compile_id="0/1"))
    rec.frames.append(FrameEvent("0/0", "f", "/app/m.py", 4, None, None, None, frame_id=0))
    # the limit fails before dynamo_start: the metrics name no code, the frame_id does
    rec.frames.append(FrameEvent("0/1", None, None, None, "Unsupported", "Dynamo recompile limit exceeded\n  Explanation: ...", "r", frame_id=0))
    (s,) = rec.skipped_frames()
    assert (s.function, s.file, s.line, s.reason) == ("f", "/app/m.py", 4, "Dynamo recompile limit exceeded")
    assert (s.break_file, s.break_line) == ("/app/m.py", 7)  # filled from the break record


@pytest.mark.parametrize("name", [
    pytest.param("lstm.py", marks=needs_whole_forward_skip(str(BREAKS / "lstm.py"))), "skipped_function.py",
])
def test_whole_forward_skipped_counts_one_frame(name):
    result = lint_one(LintJob(str(BREAKS / name), reset=True))
    assert result.graph_count == 0 and len(result.skipped_frames) == 1
