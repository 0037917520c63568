"""Why a run compiled no graph at all: nothing compiled is a finding, not an empty success.

``torch.compile`` falls back to eager silently in several ways: torch disabled by the environment
or config, ``torch.compile`` replaced by the user's code, the compiler's stance set to eager, or
dynamo giving up on the forward. :func:`no_graph_cause` names the one it can see, as a plain
sentence for reports.

Example::

    >>> from graphtool.capture.graph_breaks import BreakRecorder, FrameEvent
    >>> rec = BreakRecorder()
    >>> rec.frames.append(FrameEvent("0/0", "forward", "/m.py", 10, "Unsupported", "Attempted to wrap RNN", None, "/m.py", 11))
    >>> no_graph_cause(rec, environ={})
    'dynamo skipped forward (/m.py:10) and ran it eagerly: Attempted to wrap RNN (at /m.py:11)'
    >>> no_graph_cause(BreakRecorder(), environ={"TORCHDYNAMO_DISABLE": "1"})
    'TORCHDYNAMO_DISABLE=1 is set: torch.compile returns the model unchanged'
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from graphtool.capture import compat
from graphtool.capture.graph_breaks import BreakRecorder, SkippedFrame
from graphtool.display_paths import display_path


@dataclass(frozen=True)
class CompileSeen:
    """What graphtool saw of ``torch.compile`` in a run.

    ``expected``: the ``torch.compile`` graphtool left in place (torch's own, or the redirect of
    ``lint --run``); ``found``: what ``torch.compile`` was at the end of the run; ``calls`` and
    ``disabled_calls``: calls through the redirect (None where graphtool does not count them)."""

    expected: Any
    found: Any
    calls: int | None = None
    disabled_calls: int = 0


def no_graph_cause(recorder: BreakRecorder, seen: CompileSeen | None = None, environ: Mapping[str, str] | None = None) -> str:
    """The cause graphtool can see for a run that compiled zero graphs, most decisive first."""
    env = os.environ if environ is None else environ
    for cause in (_disabled(env), _replaced(seen), _not_called(seen), _skipped(recorder.skipped_frames()), _traced_empty(recorder)):
        if cause:
            return cause
    return "dynamo compiled no frame (torch's trace has no compile event): the model never ran under torch.compile"


def _disabled(env: Mapping[str, str]) -> str | None:
    # torch/_dynamo/eval_frame.py optimize(): read at every torch.compile call, exactly "1"
    if env.get("TORCHDYNAMO_DISABLE") == "1":
        return "TORCHDYNAMO_DISABLE=1 is set: torch.compile returns the model unchanged"
    # torch/_dynamo/config.py: disable = TORCH_COMPILE_DISABLE == "1", read once at import; code may set it too
    if compat.dynamo_flag("disable"):
        if env.get("TORCH_COMPILE_DISABLE") == "1":
            return "TORCH_COMPILE_DISABLE=1 is set (torch._dynamo.config.disable): dynamo skips every frame"
        return "torch._dynamo.config.disable is True: dynamo skips every frame"
    stance = compat.compiler_stance()
    if stance == "force_eager":
        return 'torch.compiler.set_stance("force_eager") is in effect: every torch.compile call runs eagerly'
    return None


def _replaced(seen: CompileSeen | None) -> str | None:
    if seen is None or seen.found is seen.expected:
        return None
    return f"torch.compile was replaced by {describe_callable(seen.found)}, so nothing reached dynamo"


def _not_called(seen: CompileSeen | None) -> str | None:
    if seen is None or seen.calls is None:
        return None
    if seen.calls == 0:
        return "the script never called torch.compile"
    if seen.disabled_calls == seen.calls:
        return "every torch.compile call passed disable=True"
    return None


def _skipped(skipped: list[SkippedFrame]) -> str | None:
    if not skipped:
        return None
    s = skipped[0]
    where = f" ({display_path(s.file)}:{s.line})" if s.file else ""
    at = f" (at {display_path(s.break_file)}:{s.break_line})" if s.break_file else ""
    more = f"; {len(skipped) - 1} more frame{'s' if len(skipped) > 2 else ''} skipped" if len(skipped) > 1 else ""
    return f"dynamo skipped {s.function or 'a frame'}{where} and ran it eagerly: {s.reason}{at}{more}"


def _traced_empty(recorder: BreakRecorder) -> str | None:
    """Frames compiled without failing, yet no graph: a break left nothing to capture, or no tensor operation."""
    if recorder.breaks:
        b = recorder.breaks[0]
        return f"dynamo captured no operation before or after the graph break at {display_path(b.file)}:{b.line}: {b.reason}"
    if recorder.frames:
        f = recorder.frames[0]
        return f"dynamo traced {f.co_name} ({display_path(f.co_filename)}:{f.co_firstlineno}) but it has no tensor operation to compile"
    return None


def describe_callable(fn: Any) -> str:
    """``name (file:line)`` for a Python function, else its type.

    >>> describe_callable(len)
    'len'
    """
    code = getattr(fn, "__code__", None)
    name = getattr(fn, "__qualname__", None) or type(fn).__name__
    if code is None:
        return name
    return f"{name} ({display_path(code.co_filename)}:{code.co_firstlineno})"
