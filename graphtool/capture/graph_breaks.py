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
_GB_CODE = re.compile(r"/gb/(?P<code>gb\d+)")
_HINT = re.compile(r"^\s*Hint:\s*(?P<hint>.+)$", re.M)


@dataclass(frozen=True)
class GraphBreak:
    file: str | None
    line: int | None
    reason: str
    code: str | None = None  # torch's graph-break id (gb0124), stable across wording changes
    hint: str | None = None


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
                )
            )


def parse_break(payload: str) -> GraphBreak:
    """Parse one ``dynamo_graph_break_reason`` payload.

    >>> b = parse_break("Graph break in user code at /m.py:8\\nGraph Break Reason: print")
    >>> (b.file, b.line, b.reason)
    ('/m.py', 8, 'print')
    """
    at = _BREAK_AT.search(payload)
    reason_m = _REASON.search(payload)
    if reason_m:
        reason = reason_m.group("reason").strip()
        if reason.endswith(":"):  # "Encountered graph break when attempting to trace CALL: ...:"
            after = payload[reason_m.end():].splitlines()
            detail = next((ln.strip() for ln in after if ln.strip()), "")
            reason = detail or reason.rstrip(":")
    else:
        reason = (payload.strip().splitlines() or [""])[0]
    code = _GB_CODE.search(payload)
    hint = _HINT.search(payload)
    return GraphBreak(
        file=at.group("file") if at else None,
        line=int(at.group("line")) if at else None,
        reason=reason,
        code=code.group("code") if code else None,
        hint=hint.group("hint").strip() if hint else None,
    )


class quiet_torch_logs:
    """Silence torch's own log handlers (dynamo's graph-break warnings, fake-tensor tracebacks)
    while graphtool traces: graphtool reports those facts itself. The structured-trace logger
    that graphtool reads keeps working. ``--debug`` leaves torch's logs alone."""

    def __init__(self, enabled: bool = True):
        self.enabled = enabled
        self._saved: list[tuple[logging.Handler, int]] = []

    def __enter__(self):
        if not self.enabled:
            return self
        loggers = [logging.getLogger("torch")] + [
            lg for name, lg in logging.root.manager.loggerDict.items()
            if name.startswith("torch") and name != STRUCTURED_TRACE_LOGGER and isinstance(lg, logging.Logger)
        ]
        for lg in loggers:
            for h in lg.handlers:
                if not isinstance(h, BreakRecorder):
                    self._saved.append((h, h.level))
                    h.setLevel(logging.CRITICAL + 1)
        return self

    def __exit__(self, *exc):
        for h, level in self._saved:
            h.setLevel(level)
        self._saved.clear()
        return False
