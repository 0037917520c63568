"""graphtool compile's progress line, from a child's status file and its TORCH_TRACE log as they are written (no
child runs here: the files are written by hand)."""

from __future__ import annotations

import json

from graphtool.commands.compile import _Ticker
from tests.log.handmade import record


class Said:
    def __init__(self):
        self.lines = []

    def phase(self, text):
        self.lines.append(text)

    def advance(self, done, total, text):
        pass

    def note(self, text):
        pass


def _event(name, ph):
    return record("chromium_event", {}, json.dumps({"name": name, "ph": ph, "args": {"compile_id": "0/0"}}, indent=0),
                  frame_id=0, frame_compile_id=0, attempt=0)


def test_the_progress_shows_the_stage_and_the_phase_torch_is_in(tmp_path):
    status, trace = tmp_path / "s", tmp_path / "t"
    trace.mkdir()
    said = Said()
    tick = _Ticker(said, status, trace, "compiling the whole model")
    status.write_text(json.dumps({"stage": "running the model eagerly"}) + "\n")
    tick()
    log = trace / "dedicated_log_torch_trace_x.log"
    log.write_bytes(_event("dynamo", "B") + _event("entire_frame_compile", "B") + _event("backend_compile", "B")
                    + _event("inductor_compile", "B") + _event("code_gen", "B") + _event("compile_file", "B")
                    + record("artifact", {"name": "x", "encoding": "string"}, "the record torch is writing"))
    with open(status, "a") as f:
        f.write(json.dumps({"stage": "compiling the whole model"}) + "\n")
    tick.last = 0.0
    tick()
    assert said.lines[0].startswith("compiling the whole model: running the model eagerly (")
    assert said.lines[1].startswith("compiling the whole model: compiling the whole model, 0/0: C++/Triton compile (")
    with open(log, "ab") as f:
        f.write(_event("compile_file", "E") + _event("code_gen", "E") + _event("x", "B"))
    tick.last = 0.0
    tick()
    assert ", 0/0: inductor lowering (" in said.lines[2]


def test_the_step_is_timed_once_it_has_settled():
    from graphtool.capture.processes.compile_worker import _Step

    class Clock(_Step):
        def __init__(self, times):
            self.times = list(times)

        def __call__(self, fn):
            return self.times.pop(0)

    assert Clock([4.3, 0.98, 0.23, 0.07, 0.06, 0.5]).settle(None) == 5  # as a per-block compiled decoder's steps went
    assert Clock([0.1, 0.1]).settle(None) == 2
    assert Clock([1.0, 0.1] * 10).settle(None, most=6) == 6  # never steady: at most ``most``
