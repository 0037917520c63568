"""Collect graph breaks, recompiles and skipped frames from torch's structured trace.

``torch._dynamo.explain`` counts breaks as ``graphs - 1`` (wrong for a break before the first op or
inside a loop) and ``counters["graph_break"]`` has no file or line. The structured trace (what
TORCH_TRACE and tlparse read) names every break: ``dynamo_graph_break_reason`` artifacts start with
``Graph break in user code at FILE:LINE`` and ``compilation_metrics`` events carry
``fail_type``/``fail_reason`` and recompile reasons.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass, field

from graphtool.capture.compat import STRUCTURED_TRACE_LOGGER

_BREAK_AT = re.compile(r"Graph break in user code at (?P<file>.+?):(?P<line>\d+)")
_REASON = re.compile(r"Graph Break Reason:\s*(?P<reason>.*)")


@dataclass(frozen=True)
class GraphBreak:
    file: str | None
    line: int | None
    reason: str
    frame: str | None = None


@dataclass
class FrameEvent:
    """One dynamo compile of a frame (from ``compilation_metrics``)."""

    compile_id: str
    co_name: str | None
    co_filename: str | None
    co_firstlineno: int | None
    fail_type: str | None
    fail_reason: str | None
    recompile_reason: str | None
    graph_count: int = 0


@dataclass
class BreakRecorder(logging.Handler):
    """Context manager: attach to ``torch.__trace`` and keep the events graphtool needs."""

    breaks: list[GraphBreak] = field(default_factory=list)
    frames: list[FrameEvent] = field(default_factory=list)

    def __post_init__(self):
        logging.Handler.__init__(self, level=logging.DEBUG)
        self._logger = logging.getLogger(STRUCTURED_TRACE_LOGGER)
        self._saved: tuple | None = None

    # logging.Handler uses identity hashing; the dataclass would make it unhashable.
    __hash__ = logging.Handler.__hash__

    def __enter__(self):
        lg = self._logger
        self._saved = (lg.level, lg.propagate)
        lg.setLevel(logging.DEBUG)
        lg.propagate = False
        lg.addHandler(self)
        return self

    def __exit__(self, *exc):
        lg = self._logger
        lg.removeHandler(self)
        lg.setLevel(self._saved[0])
        lg.propagate = self._saved[1]
        return False

    def emit(self, record: logging.LogRecord) -> None:
        meta = getattr(record, "metadata", None)
        if not isinstance(meta, dict):
            return
        artifact = meta.get("artifact")
        if isinstance(artifact, dict) and artifact.get("name") == "dynamo_graph_break_reason":
            self.breaks.append(parse_break(str(getattr(record, "payload", "") or "")))
        elif "compilation_metrics" in meta:
            m = meta["compilation_metrics"]
            self.frames.append(
                FrameEvent(
                    compile_id=str(m.get("compile_id")),
                    co_name=m.get("co_name"),
                    co_filename=m.get("co_filename"),
                    co_firstlineno=m.get("co_firstlineno"),
                    fail_type=m.get("fail_type"),
                    fail_reason=m.get("fail_reason"),
                    recompile_reason=m.get("recompile_reason"),
                    graph_count=int(m.get("graph_op_count") is not None),
                )
            )


def parse_break(payload: str) -> GraphBreak:
    """Parse one ``dynamo_graph_break_reason`` payload.

    >>> parse_break("Graph break in user code at /m.py:8\\nGraph Break Reason: print").line
    8
    """
    at = _BREAK_AT.search(payload)
    reason_m = _REASON.search(payload)
    reason = reason_m.group("reason").strip() if reason_m else payload.strip().splitlines()[0] if payload.strip() else ""
    if at:
        return GraphBreak(file=at.group("file"), line=int(at.group("line")), reason=reason)
    return GraphBreak(file=None, line=None, reason=reason)
