"""Collect graph breaks, recompiles and skipped frames from torch's structured trace.

``torch._dynamo.explain`` counts breaks as ``graphs - 1`` (wrong for a break before the first op or
inside a loop) and ``counters["graph_break"]`` has no file or line. The structured trace (what
TORCH_TRACE and tlparse read) names every break: ``dynamo_graph_break_reason`` artifacts start with
``Graph break in user code at FILE:LINE`` and ``compilation_metrics`` events carry
``fail_type``/``fail_reason`` and recompile reasons.

A frame dynamo gives up on (runs eagerly, compiling nothing of it) shows on two paths: a
``dynamo_graph_break_reason`` artifact ("Failed to handle graph break gracefully. Skipping the
function", or convert_frame's "torch.compile will skip tracing the frame") and a
``compilation_metrics`` event with ``fail_type``. :meth:`BreakRecorder.skipped_frames` merges both
by compile id, so one frame counts once whichever paths reported it.
"""

from __future__ import annotations

import logging
import re
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from graphtool.capture import compat
from graphtool.capture.compat import STRUCTURED_TRACE_LOGGER
from graphtool.text import first_line

_BREAK_AT = re.compile(r"Graph break in user code at (?P<file>.+?):(?P<line>\d+)")
_REASON = re.compile(r"Graph Break Reason:\s*(?P<reason>.*)")
_GB_CODE = re.compile(r"/gb/(?P<code>gb\d+)")
_HINT = re.compile(r"^\s*Hint:\s*(?P<hint>.+)$", re.M)
# symbolic_convert: the root frame could not resume after the break, so dynamo skips all of it
_SKIPS_FUNCTION = "Failed to handle graph break gracefully. Skipping the function"
# convert_frame (logged only while torch's graph_breaks log is on): names the frame it skips
_RESUME_SKIP = re.compile(r"torch\.compile will skip tracing the frame (?P<name>\S+) \((?P<file>.+) line (?P<line>\d+)\)")
_EXC_REASON = re.compile(r"^[\w.]*(?:Unsupported|UserError): (?P<reason>.+)$", re.M)
_TB_FRAME = re.compile(r'^\s*File "(?P<file>[^"]+)", line (?P<line>\d+), in (?P<name>\S+)', re.M)
_GRAPHTOOL_DIR = str(Path(__file__).resolve().parents[1])


@dataclass(frozen=True)
class StackFrame:
    file: str
    line: int
    name: str


@dataclass(frozen=True)
class GraphBreak:
    file: str | None
    line: int | None
    reason: str
    code: str | None = None  # torch's graph-break id (gb0124), stable across wording changes
    hint: str | None = None
    skips_frame: bool = False  # dynamo gave up on the whole frame it was compiling
    compile_id: str | None = field(default=None, compare=False)
    # the frames that led to the break, outermost first, inlined ones included (see _break_stack)
    stack: tuple[StackFrame, ...] = field(default=(), compare=False, repr=False)
    skipped_function: str | None = field(default=None, compare=False)  # convert_frame's path names the frame
    skipped_file: str | None = field(default=None, compare=False)
    skipped_line: int | None = field(default=None, compare=False)
    # 0-based column range of the expression that broke on ``line`` (Python 3.11+ positions), when known
    col: int | None = field(default=None, compare=False)
    end_col: int | None = field(default=None, compare=False)


@dataclass(frozen=True)
class BreakRecord:
    """One graph break where it points, for every command (:func:`placed`): the user's
    own line, torch's place as the library's when the user's line led into library code. trace's view of it is
    :class:`~graphtool.analysis.trace_report.BreakInfo`, lint's :class:`~graphtool.analysis.lint.Break`; a lint
    child's are deduplicated by (file, line, reason), ``occurrences`` counting them."""

    reason: str
    code: str | None = None  # torch's gbNNNN id
    file: str | None = None
    line: int | None = None
    source_text: str | None = None  # the stripped line at ``file:line`` when traced (graphtool diff matches by it)
    hint: str | None = None  # torch's suggested fix
    occurrences: int = 1
    # where torch saw the break when that is library code (torch, an installed package); ``file`` and
    # ``line`` are then the user's own frame that led there
    library_file: str | None = None
    library_line: int | None = None
    # 0-based column range of the expression that broke on ``line`` (Python 3.11+), when torch says
    col: int | None = None
    end_col: int | None = None


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
    fail_file: str | None = None  # where the failure happened (torch's innermost user frame)
    fail_line: int | None = None
    frame_id: int | None = None  # the same for every compile of one code object
    # the Python frames that called the compiled frame, outermost first (the frame itself is not yet running)
    stack: tuple[StackFrame, ...] = field(default=(), repr=False)


_GUARD_FRAME = re.compile(r'^\s*File "(?P<file>[^"]+)", line (?P<line>\d+)', re.M)
_NEXT_GUARD = re.compile(r"\n\s*-?\s*\d+/\d+: ")


def guard_site(reason: str | None) -> tuple[str, int] | None:
    """``(file, line)`` where the value the first failed guard checks is used: the innermost user frame of the
    ``User stack trace`` torch prints under a recompile reason. A value a graph break handed on (``___stack0 ==
    0.27``) is guarded in the frame that resumes after the break, whose first line is the break's, not the use's.
    None when torch printed no user frame (a guard inside torch's own code: an optimizer's ``lr``).

    >>> guard_site('1/0: ___stack0 == 0.27  # y * s  # m.py:19 in r\\nUser stack trace:\\n  File "/app/m.py", line 19, in r')
    ('/app/m.py', 19)
    >>> guard_site("0/0: tensor 'x' size mismatch at index 0. expected 2, actual 3") is None
    True
    """
    text = str(reason or "")
    start = text.find("User stack trace:")
    if start < 0:
        return None
    block = text[start:]
    more = _NEXT_GUARD.search(block)
    frames = [(m.group("file"), int(m.group("line"))) for m in _GUARD_FRAME.finditer(block[:more.start()] if more else block)]
    user = [f for f in frames if is_user_file(f[0])]
    return user[-1] if user else None


def hit_recompile_limit(fail_reason: str | None) -> bool:
    """Whether a frame's failed compile is dynamo giving up past ``recompile_limit`` (``cache_size_limit`` in older
    releases), after which the frame runs eagerly with no error.

    >>> hit_recompile_limit("Dynamo recompile limit exceeded"), hit_recompile_limit("Attempted to wrap RNN")
    (True, False)
    """
    reason = str(fail_reason or "")
    return "recompile limit" in reason.lower() or "recompile_limit" in reason or "cache_size_limit" in reason


@dataclass(frozen=True)
class SkippedFrame:
    """A frame dynamo gave up on and ran eagerly: ``file``/``line`` are its ``def``, ``break_*`` where it broke."""

    function: str | None
    file: str | None
    line: int | None
    reason: str
    break_file: str | None = None
    break_line: int | None = None
    stack: tuple[StackFrame, ...] = field(default=(), compare=False, repr=False)


class TraceLogListener(logging.Handler):
    """A handler that listens to torch's structured-trace logger (what TORCH_TRACE and tlparse read)
    for a ``with`` block: level DEBUG and propagation off while attached, both restored after.
    Subclasses say what to keep in ``emit``."""

    def __init__(self):
        super().__init__(level=logging.DEBUG)
        self._logger = logging.getLogger(STRUCTURED_TRACE_LOGGER)
        self._saved: tuple | None = None

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


@dataclass
class BreakRecorder(TraceLogListener):
    """Context manager: attach to ``torch.__trace`` and keep the events graphtool needs."""

    breaks: list[GraphBreak] = field(default_factory=list)
    frames: list[FrameEvent] = field(default_factory=list)
    # convert_frame's "will skip tracing the frame" records: evidence of a skip, not a break torch
    # always logs (only while its graph_breaks log is on), so they are kept out of ``breaks``
    skip_notes: list[GraphBreak] = field(default_factory=list)

    def __post_init__(self):
        TraceLogListener.__init__(self)

    # logging.Handler uses identity hashing; the dataclass would make it unhashable.
    __hash__ = logging.Handler.__hash__

    def mark(self) -> tuple[int, int, int]:
        """Where the records stand now, for :meth:`rewind`."""
        return len(self.breaks), len(self.frames), len(self.skip_notes)

    def rewind(self, mark: tuple[int, int, int]) -> None:
        """Forget what was recorded since ``mark`` (a run that failed part way: its records are not findings)."""
        del self.breaks[mark[0]:], self.frames[mark[1]:], self.skip_notes[mark[2]:]


    def emit(self, record: logging.LogRecord) -> None:
        meta = getattr(record, "metadata", None)
        if not isinstance(meta, dict):
            return
        artifact = meta.get("artifact")
        if isinstance(artifact, dict) and artifact.get("name") == "dynamo_graph_break_reason":
            b = parse_break(str(getattr(record, "payload", "") or ""), compile_id=_compile_key(meta))
            b = replace(b, stack=_break_stack(b.stack))
            span = compat.tracing_span()
            if span and span[:2] == (b.file, b.line):
                b = replace(b, col=span[2], end_col=span[3])
            (self.skip_notes if b.skipped_function else self.breaks).append(b)
        elif "compilation_metrics" in meta:
            self.frames.append(_named(_frame_event(meta), self.frames))

    def skipped_frames(self) -> list[SkippedFrame]:
        """Every frame dynamo gave up on, once each, from both of torch's paths.

        >>> rec = BreakRecorder()
        >>> rec.frames.append(FrameEvent("0/0", "forward", "/m.py", 3, "Unsupported", "Attempted to wrap RNN", None, "/m.py", 4))
        >>> rec.breaks.append(parse_break(f"Graph break in user code at /m.py:4\\nGraph Break Reason: {_SKIPS_FUNCTION} x", compile_id="0/0"))
        >>> [(s.function, s.line, s.reason, s.break_line) for s in rec.skipped_frames()]
        [('forward', 3, 'Attempted to wrap RNN', 4)]
        """
        names = {f.frame_id: f for f in self.frames if f.co_name and f.frame_id is not None}
        found: dict[object, SkippedFrame] = {}
        for f in self.frames:
            if f.fail_type:
                named = f if f.co_name else names.get(f.frame_id, f)  # see _named
                found[f.compile_id] = SkippedFrame(named.co_name, named.co_filename, named.co_firstlineno,
                                                   first_line(f.fail_reason) or f.fail_type, f.fail_file, f.fail_line, f.stack)
        for b in [*self.breaks, *self.skip_notes]:
            if not b.skips_frame:
                continue
            if b.compile_id not in found:
                found[b.compile_id or id(b)] = _skipped_from_break(b, names.get(_frame_id(b.compile_id)))
            elif found[b.compile_id].break_file is None:  # the metrics of a failure before tracing name no line
                found[b.compile_id] = replace(found[b.compile_id], break_file=b.file, break_line=b.line)
        unique: dict[tuple, SkippedFrame] = {}
        for s in found.values():
            unique.setdefault((s.function, s.file, s.line) if s.function else (id(s),), s)
        return list(unique.values())


def _compile_key(meta: dict) -> str | None:
    """``frame_id/frame_compile_id`` of the compile a trace record belongs to (``"0/1"``), as in
    ``compilation_metrics``' own ``compile_id``."""
    if meta.get("frame_id") is None:
        return None
    return f"{meta['frame_id']}/{meta.get('frame_compile_id')}"


def _frame_id(compile_id: str | None) -> int | None:
    head = (compile_id or "").split("/")[0]
    return int(head) if head.isdigit() else None


def _frame_event(meta: dict) -> FrameEvent:
    m = meta["compilation_metrics"]
    return FrameEvent(
        compile_id=_compile_key(meta) or str(m.get("compile_id")),
        co_name=m.get("co_name"),
        co_filename=m.get("co_filename"),
        co_firstlineno=m.get("co_firstlineno"),
        fail_type=m.get("fail_type"),
        fail_reason=m.get("fail_reason"),
        recompile_reason=m.get("recompile_reason"),
        fail_file=m.get("fail_user_frame_filename"),
        fail_line=m.get("fail_user_frame_lineno"),
        frame_id=meta.get("frame_id"),
        # metrics are logged while dynamo's frame callback runs, so the live stack is the caller's
        stack=_python_stack(),
    )


def _named(event: FrameEvent, earlier: list[FrameEvent]) -> FrameEvent:
    """A failure before dynamo_start (the recompile limit) logs no code; an earlier compile with the
    same frame_id was of the same code object."""
    if event.co_name is not None or event.frame_id is None:
        return event
    for f in earlier:
        if f.co_name and f.frame_id == event.frame_id:
            event.co_name, event.co_filename, event.co_firstlineno = f.co_name, f.co_filename, f.co_firstlineno
            break
    return event


def _python_stack() -> tuple[StackFrame, ...]:
    frames = []
    f = sys._getframe(1)
    while f is not None:
        if f.f_code.co_filename != __file__:
            frames.append(StackFrame(f.f_code.co_filename, f.f_lineno, f.f_code.co_name))
        f = f.f_back
    return tuple(reversed(frames))


def _break_stack(logged: tuple[StackFrame, ...]) -> tuple[StackFrame, ...]:
    """Where a break sits in the user's code, outermost first: the Python callers of the frame
    dynamo compiles, that frame at the line dynamo reached, then the inlined frames torch logged.

    torch's logged traceback alone is not enough: it folds consecutive frames of one name as if
    they were resume functions, so a user's ``forward`` calling a library module's ``forward``
    disappears from it. Each part is cut to what graphtool called (see :func:`user_site`)."""
    above = _called_by_graphtool(_python_stack())
    traced = tuple(StackFrame(*f) for f in compat.tracing_stack())
    seen = {(f.file, f.line) for f in above}  # the logged traceback repeats the callers first
    inlined = tuple(f for f in _called_by_graphtool(logged) if (f.file, f.line) not in seen)
    return (*above, *traced, *inlined)


def _called_by_graphtool(stack: Sequence[StackFrame]) -> tuple[StackFrame, ...]:
    """The frames below graphtool's innermost own frame: a test runner above graphtool is not the user."""
    ours = [i for i, f in enumerate(stack) if f.file.startswith(_GRAPHTOOL_DIR)]
    return tuple(stack[ours[-1] + 1:] if ours else stack)


def _skipped_from_break(b: GraphBreak, named: FrameEvent | None) -> SkippedFrame:
    if b.skipped_function:
        return SkippedFrame(b.skipped_function, b.skipped_file, b.skipped_line, b.reason, b.file, b.line, b.stack)
    if named is not None:
        return SkippedFrame(named.co_name, named.co_filename, named.co_firstlineno, b.reason, b.file, b.line, b.stack)
    return SkippedFrame(None, b.file, b.line, b.reason, b.file, b.line, b.stack)


def parse_break(payload: str, compile_id: str | None = None) -> GraphBreak:
    """Parse one ``dynamo_graph_break_reason`` payload.

    >>> b = parse_break("Graph break in user code at /m.py:8\\nGraph Break Reason: print")
    >>> (b.file, b.line, b.reason, b.skips_frame)
    ('/m.py', 8, 'print', False)
    """
    skip = _RESUME_SKIP.search(payload)
    if skip:
        return _parse_resume_skip(payload, skip, compile_id)
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
        skips_frame=_SKIPS_FUNCTION in payload,
        compile_id=compile_id,
        stack=_user_traceback(payload, "User code traceback:"),
    )


def _parse_resume_skip(payload: str, skip: re.Match, compile_id: str | None) -> GraphBreak:
    """convert_frame's "torch.compile will skip tracing the frame NAME (FILE line N)" record."""
    stack = _user_traceback(payload, "The graph break occurred in the following user code:")
    reason = _EXC_REASON.search(payload)
    code = _GB_CODE.search(payload)
    return GraphBreak(
        file=stack[-1].file if stack else None,
        line=stack[-1].line if stack else None,
        reason=reason.group("reason").strip() if reason else first_line(payload) or "",
        code=code.group("code") if code else None,
        skips_frame=True,
        compile_id=compile_id,
        stack=stack,
        skipped_function=skip.group("name"),
        skipped_file=skip.group("file"),
        skipped_line=int(skip.group("line")),
    )


def _user_traceback(payload: str, heading: str) -> tuple[StackFrame, ...]:
    """The frames under ``heading``, up to the Python traceback torch appends (dynamo's internals)."""
    start = payload.find(heading)
    if start < 0:
        return ()
    section = payload[start:].split("Traceback (most recent call last):")[0]
    return tuple(StackFrame(m.group("file"), int(m.group("line")), m.group("name")) for m in _TB_FRAME.finditer(section))


def is_user_file(filename: str | None) -> bool:
    """Whether ``filename`` is the user's own code: not torch, not an installed package (transformers),
    not the standard library, not graphtool, not generated code (``<string>``).

    >>> is_user_file("/app/model.py"), is_user_file("/venv/lib/python3.11/site-packages/transformers/x.py")
    (True, False)
    """
    if not filename or filename.startswith("<") or filename.startswith(_GRAPHTOOL_DIR):
        return False
    norm = filename.replace("\\", "/")
    torch = sys.modules.get("torch")
    torch_dir = str(Path(torch.__file__).parent) if getattr(torch, "__file__", None) else None
    if torch_dir and filename.startswith(torch_dir):  # also a torch checkout outside site-packages
        return False
    # the rule of graphtool.capture.user.boundary._is_user_file, with every installed package left out
    return not any(part in norm for part in ("/site-packages/", "/dist-packages/", "/importlib/", "/lib/python3"))


def user_site(stack: Sequence[StackFrame]) -> StackFrame | None:
    """The innermost frame of the user's own code in ``stack`` (outermost first). Frames above
    graphtool's own call (a test runner calling graphtool) are not the user's.

    >>> lib = StackFrame("/venv/lib/python3.11/site-packages/torch/nn/modules/module.py", 1778, "_call_impl")
    >>> user_site([StackFrame("/app/train.py", 9, "<module>"), lib])
    StackFrame(file='/app/train.py', line=9, name='<module>')
    >>> user_site([lib]) is None
    True
    """
    return next((f for f in reversed(_called_by_graphtool(stack)) if is_user_file(f.file)), None)


def user_call(b: GraphBreak) -> StackFrame | None:
    """For a break in library code (torch named a file that is not the user's), the user's call that led there:
    :func:`at_user_code`'s user place as a frame; None when torch named the user's own line, or no user frame is on
    the stack (a library model's code all the way down).

    >>> lib = "/venv/lib/python3.11/site-packages/lib/x.py"
    >>> user_call(GraphBreak(lib, 8, "r", stack=(StackFrame("/app/m.py", 19, "forward"), StackFrame(lib, 8, "scale"))))
    StackFrame(file='/app/m.py', line=19, name='forward')
    >>> user_call(GraphBreak("/app/m.py", 19, "r")) is None
    True
    """
    if b.file is None or is_user_file(b.file):
        return None
    return user_site(b.stack)


def at_user_code(file: str | None, line: int | None, stack, called_at: StackFrame | None = None) -> tuple:
    """Where a finding torch placed points, for trace and lint alike: ``(file, line, library_file, library_line)``,
    unchanged when torch named the user's own code, else the innermost user frame of ``stack`` (or ``called_at``)
    with torch's place as the library's; torch's place when no user frame led there (a library model's own code).

    >>> at_user_code("/app/m.py", 4, ())
    ('/app/m.py', 4, None, None)
    >>> at_user_code("/venv/lib/python3.11/site-packages/torch/_dynamo/external_utils.py", 67, (), StackFrame("/app/m.py", 9, "m"))
    ('/app/m.py', 9, '/venv/lib/python3.11/site-packages/torch/_dynamo/external_utils.py', 67)
    """
    if file is None or is_user_file(file):
        return file, line, None, None
    site = user_site(stack) or called_at
    if site is None:  # no user frame anywhere: torch's place is the best there is
        return file, line, None, None
    return site.file, site.line, file, line


def placed(b) -> BreakRecord:
    """A captured break (:class:`GraphBreak`) as the one record every command shows
    (:class:`BreakRecord`), where :func:`at_user_code` places it: the columns
    only where it stays at torch's place (they are of that line), the source text of the line it points to.

    >>> r = placed(GraphBreak("/app/m.py", 4, "print", col=8, end_col=16))
    >>> (r.file, r.line, r.col, r.library_file)
    ('/app/m.py', 4, 8, None)
    """
    import linecache

    file, line, library_file, library_line = at_user_code(b.file, b.line, getattr(b, "stack", ()))
    here = library_file is None
    return BreakRecord(reason=b.reason, code=getattr(b, "code", None), file=file, line=line,
                       source_text=(linecache.getline(file, line).strip() or None) if file and line else None,
                       hint=getattr(b, "hint", None), library_file=library_file, library_line=library_line,
                       col=getattr(b, "col", None) if here else None, end_col=getattr(b, "end_col", None) if here else None)


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
