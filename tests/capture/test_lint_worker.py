"""Lint counts agree with torch's own graph-break log, including where explain() is wrong."""

from __future__ import annotations

import logging
import re

import pytest
import torch

from graphtool.capture.processes.lint_job import LintJob
from graphtool.capture.processes.lint_worker import lint_one
from tests.helpers import FIXTURES, needs_whole_forward_skip

BREAKS = FIXTURES / "breaks"
_AT = re.compile(r"Graph break in user code at (.+?):(\d+)")


class _Collect(logging.Handler):
    def __init__(self):
        super().__init__(level=logging.DEBUG)
        self.locations: set[tuple[str, int]] = set()

    def emit(self, record):
        m = _AT.search(record.getMessage())
        if m:
            self.locations.add((m.group(1), int(m.group(2))))


@pytest.fixture
def torch_graph_break_log():
    """torch's own graph-break log records (TORCH_LOGS=graph_breaks), collected in-process."""
    yield from _listening_to_graph_breaks(_Collect())


def _listening_to_graph_breaks(handler):
    """torch's graph_breaks log on, ``handler`` on each of its loggers, for the fixture's lifetime."""
    import torch._dynamo.convert_frame
    import torch._dynamo.symbolic_convert  # both log graph breaks: their loggers must exist to be found

    torch._logging.set_logs(graph_breaks=True)
    loggers = [logging.getLogger(n) for n in list(logging.root.manager.loggerDict) if n.endswith("__graph_breaks")]
    for lg in loggers:
        lg.addHandler(handler)
    yield handler
    for lg in loggers:
        lg.removeHandler(handler)
    torch._logging.set_logs()


CASES = {
    "print_mid.py": {6},
    "before_first_op.py": {5},
    "in_loop.py": {8},
    "builtin.py": {6},
    "item_branch.py": {6},
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_breaks_equal_torchs_graph_break_log(name, torch_graph_break_log):
    result = lint_one(LintJob(str(BREAKS / name), debug=True, reset=True))
    ours = {(b.file, b.line) for b in result.breaks}
    assert ours == torch_graph_break_log.locations
    assert {line for _, line in ours} == CASES[name]


def test_a_break_underlines_the_expression_that_broke():
    from graphtool.analysis.lint import LintReport, LintTarget, judge
    from graphtool.render.lint import lint_diagnostics

    result = lint_one(LintJob(str(BREAKS / "item_branch.py"), reset=True))
    (d,) = [d for d in lint_diagnostics(LintReport((judge(LintTarget("m.py"), result),), None)) if d.code == "GT-B001"]
    assert d.source[d.col - 1:d.col - 1 + d.span] == "y.sum().item()"  # the caret ran under the whole line


@pytest.mark.parametrize("name", ["before_first_op.py", "in_loop.py"])
def test_explain_miscounts_where_lint_is_right(name):
    from graphtool.capture.user.script import load_model

    spec = load_model(str(BREAKS / name))
    torch._dynamo.reset()
    explained = torch._dynamo.explain(spec.model)(*spec.args).graph_break_count
    ours = len(lint_one(LintJob(str(BREAKS / name), reset=True)).breaks)
    assert ours == 1
    assert explained != ours  # graphs - 1: 0 before the first op, -1 or 0 in a loop


def test_recompile_on_a_new_shape_with_guard_reason():
    result = lint_one(LintJob(str(BREAKS / "recompile.py"), dynamic=True, reset=True))
    assert result.graph_count == 2
    (r,) = result.recompiles
    assert "size mismatch at index 0. expected 4, actual 5" in r.reason
    assert r.function == "f" and r.file.endswith("recompile.py")


def test_dynamic_inputs_convention_is_used():
    result = lint_one(LintJob("examples/dynamic_batch.py", dynamic=True, reset=True))
    (r,) = result.recompiles
    assert "expected 4, actual 7" in r.reason


def test_skipped_frame_in_loop():
    result = lint_one(LintJob(str(BREAKS / "in_loop.py"), reset=True))
    assert [(s.function, s.line) for s in result.skipped_frames] == [("f", 4)]


def test_script_mode_redirects_every_compile():
    result = lint_one(LintJob(str(BREAKS / "train_script.py"), run=True, args=("3",), reset=True))
    assert [(b.line, b.occurrences >= 1) for b in result.breaks] == [(13, True)]
    assert len(result.recompiles) == 2
    assert result.graph_count >= 2


# -- frames torch gives up on, and places at the user's own code ----------------------------------

_SKIP_WORDS = ("Skipping the function and falling back to eager", "will skip tracing the frame")


class _CollectSkips(logging.Handler):
    """torch's graph-break log records that say a whole frame was skipped (run eagerly)."""

    def __init__(self):
        super().__init__(level=logging.DEBUG)
        self.records: list[str] = []

    def emit(self, record):
        message = record.getMessage()
        if any(w in message for w in _SKIP_WORDS):
            self.records.append(message)


@pytest.fixture
def torch_skip_log():
    yield from _listening_to_graph_breaks(_CollectSkips())


@pytest.mark.parametrize("name, function, line", [
    pytest.param("lstm.py", "forward", 12, marks=needs_whole_forward_skip(str(BREAKS / "lstm.py"))),
    ("skipped_function.py", "f", 5), ("in_loop.py", "f", 4),
])
def test_skipped_frames_equal_torchs_skip_records(name, function, line, torch_skip_log):
    # with torch's graph_breaks log on, each skip reaches graphtool twice (break record + metrics): once counted
    result = lint_one(LintJob(str(BREAKS / name), debug=True, reset=True))
    assert len(result.skipped_frames) == len(torch_skip_log.records) == 1
    (s,) = result.skipped_frames
    assert (s.function, s.line) == (function, line) and s.file.endswith(name)
    torch_at = _AT.search(torch_skip_log.records[0])
    assert (s.break_file, s.break_line) == (torch_at.group(1), int(torch_at.group(2)))


@pytest.mark.slow
def test_mixtral_skipped_frames_equal_torchs_skip_records(torch_skip_log):
    pytest.importorskip("transformers")
    result = lint_one(LintJob(str(BREAKS / "mixtral.py"), debug=True, reset=True))
    assert result.graph_count > 0
    assert len(torch_skip_log.records) > 1
    assert len(result.skipped_frames) == len(torch_skip_log.records)
    # every one of them is torch's code in transformers, reported at the model script that graphtool ran
    assert {s.file for s in result.skipped_frames} == {str(BREAKS / "mixtral.py")}
    assert all("/transformers/" in s.library_file for s in result.skipped_frames)


class _CollectMetrics(logging.Handler):
    """torch's own ``compilation_metrics`` events, as TORCH_TRACE records them."""

    def __init__(self):
        super().__init__(level=logging.DEBUG)
        self.metrics: list[dict] = []

    def emit(self, record):
        meta = getattr(record, "metadata", None)
        if isinstance(meta, dict) and "compilation_metrics" in meta:
            self.metrics.append(meta["compilation_metrics"])


def _linted_with_metrics(job: LintJob):
    from graphtool.capture.compat import STRUCTURED_TRACE_LOGGER

    handler = _CollectMetrics()
    logging.getLogger(STRUCTURED_TRACE_LOGGER).addHandler(handler)
    try:
        return lint_one(job), handler.metrics
    finally:
        logging.getLogger(STRUCTURED_TRACE_LOGGER).removeHandler(handler)


def test_recompile_of_a_sequential_points_at_the_users_file():
    result, metrics = _linted_with_metrics(LintJob(str(BREAKS / "sequential.py"), dynamic=True, reset=True))
    (torch_said,) = [m for m in metrics if m.get("recompile_reason")]
    assert torch_said["co_filename"].endswith("torch/_dynamo/external_utils.py")  # torch's own wrapper frame
    (r,) = result.recompiles
    assert (r.library_file, r.library_line) == (torch_said["co_filename"], torch_said["co_firstlineno"])
    # graphtool called the model on the script's example inputs: that line stands for the user's call
    assert (r.file, r.line) == (str(BREAKS / "sequential.py"), 6)


def test_recompile_under_run_points_at_the_scripts_call():
    result = lint_one(LintJob(str(BREAKS / "sequential_script.py"), run=True, reset=True))
    (r,) = result.recompiles
    assert r.file.endswith("sequential_script.py") and r.line == 7  # net(torch.randn(batch, 4))
    assert r.library_file.endswith("torch/_dynamo/external_utils.py")


def test_break_in_library_code_points_at_the_users_call(torch_graph_break_log):
    result = lint_one(LintJob(str(BREAKS / "library_break.py"), debug=True, reset=True))
    ((torch_file, torch_line),) = torch_graph_break_log.locations
    assert torch_file.endswith("torch/nn/modules/container.py")  # where torch itself puts the break
    (b,) = result.breaks
    assert (b.library_file, b.library_line) == (torch_file, torch_line)
    assert (b.file, b.line, b.source_text) == (str(BREAKS / "library_break.py"), 18, "y = self.body(x)")


@needs_whole_forward_skip(str(BREAKS / "lstm.py"))
def test_forward_skipped_entirely_is_a_skipped_frame_and_no_graph():
    result = lint_one(LintJob(str(BREAKS / "lstm.py"), reset=True))
    assert result.graph_count == 0
    assert [(s.function, s.line, s.reason) for s in result.skipped_frames] == [("forward", 12, "Attempted to wrap RNN, GRU, or LSTM")]
    assert result.no_graph and "forward" in result.no_graph


def test_a_break_with_no_user_frame_stays_at_the_library_line_not_the_factory():
    """Was: ``helper_break.py:26:1: GT-B001 ... (in .../breaklib/__init__.py:8)``, the factory's def line
    underlined. A library model's break has no user frame: it is shown where it broke."""
    lib = BREAKS / "site-packages" / "breaklib" / "__init__.py"
    result = lint_one(LintJob(str(BREAKS / "helper_break.py"), entry="get_library_model", reset=True))
    (b,) = result.breaks
    assert (b.file, b.line, b.source_text) == (str(lib), 8, "torch._dynamo.graph_break()")
    assert b.library_file is None
    # reached from the user's forward: the user's call, the library's line in parentheses (as before)
    (b,) = lint_one(LintJob(str(BREAKS / "helper_break.py"), reset=True)).breaks
    assert (b.file, b.line, b.library_file, b.library_line) == (str(BREAKS / "helper_break.py"), 19, str(lib), 8)
