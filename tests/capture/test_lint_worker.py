"""Lint counts agree with torch's own graph-break log, including where explain() is wrong."""

from __future__ import annotations

import logging
import re

import pytest
import torch

from graphtool.capture.lint_job import LintJob
from graphtool.capture.lint_worker import lint_one
from tests.helpers import FIXTURES

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
    import torch._dynamo.symbolic_convert

    torch._logging.set_logs(graph_breaks=True)
    handler = _Collect()
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


@pytest.mark.parametrize("name", ["before_first_op.py", "in_loop.py"])
def test_explain_miscounts_where_lint_is_right(name):
    from graphtool.capture.script import load_model

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
