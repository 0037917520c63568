"""Where user code fails: its frames, its line, and the one boundary that turns its exceptions into
graphtool errors.

Every call into the user's code (importing the script, calling the factory, running the model,
running a script under ``lint --run``) goes through :func:`running_user_code`, which maps whatever
the code raises to a :class:`~graphtool.errors.UserCodeFailed` naming the user's innermost line;
``graphtool.errors`` errors pass through unchanged and KeyboardInterrupt stays an interrupt.

Example::

    >>> with running_user_code("calling the model"):
    ...     int("seven")
    Traceback (most recent call last):
    graphtool.errors.UserCodeFailed: calling the model: ValueError: invalid literal for int() with base 10: 'seven'
"""

from __future__ import annotations

import contextlib
import os
import threading
import traceback
from pathlib import Path

from graphtool.errors import GraphtoolError, UserCodeFailed

_GRAPHTOOL_DIR = str(Path(__file__).resolve().parents[2])


def user_frames(exc: BaseException) -> list[traceback.FrameSummary]:
    """The traceback frames that belong to the user: not graphtool, torch, or the stdlib."""
    frames = traceback.extract_tb(exc.__traceback__)
    return [f for f in frames if _is_user_file(f.filename)]


def user_location_now(skip: int = 0) -> str | None:
    """``file:line`` of the innermost user frame in what graphtool's innermost frame called, if any.

    ``skip``: frames at the top of the stack to ignore (a dispatch-mode handler calling this).
    Frames outside graphtool's call, such as the CLI framework's, are not the user's."""
    stack = traceback.extract_stack()[: -(1 + skip)]
    ours = [i for i, f in enumerate(stack) if f.filename.startswith(_GRAPHTOOL_DIR)]
    called = stack[ours[-1] + 1:] if ours else stack
    frames = [f for f in called if _is_user_file(f.filename)]
    return f"{frames[-1].filename}:{frames[-1].lineno}" if frames else None


def innermost_user_call() -> str | None:
    """The innermost user frame on the stack now, as a one-frame stack trace (``  File "m.py", line 16, in step``):
    where the user's code called into what dynamo is compiling (``opt.step()`` for an optimizer's frame, all of
    whose own lines are torch's). None when no user frame is on the stack."""
    import sys

    frame = sys._getframe(1)  # every region of every trace asks: walk the frames, read no source line
    while frame is not None:
        code = frame.f_code
        if _is_user_file(code.co_filename):
            return f'  File "{code.co_filename}", line {frame.f_lineno}, in {code.co_name}\n'
        frame = frame.f_back
    return None


def _is_user_file(filename: str) -> bool:
    if filename.startswith("<") or filename.startswith(_GRAPHTOOL_DIR):
        return False
    norm = filename.replace("\\", "/")
    if "/site-packages/torch/" in norm or "/importlib/" in norm or "/lib/python3" in norm and "site-packages" not in norm:
        return False
    return True


def exception_chain(exc: BaseException) -> list[BaseException]:
    """``exc`` and what it wraps, outermost first: dynamo's ``BackendCompilerFailed`` holds the backend's
    error as ``inner_exception`` (raised ``from None``), others chain by ``__cause__`` or ``__context__``."""
    chain: list[BaseException] = []
    e: BaseException | None = exc
    while e is not None and all(e is not c for c in chain):
        chain.append(e)
        inner = getattr(e, "inner_exception", None)
        if isinstance(inner, BaseException):
            e = inner
        elif e.__cause__ is not None:
            e = e.__cause__
        else:
            e = None if e.__suppress_context__ else e.__context__
    return chain


def _is_stdlib(filename: str) -> bool:
    norm = filename.replace("\\", "/")
    return filename.startswith("<") or "/importlib/" in norm or ("/lib/python3" in norm and "site-packages" not in norm)


def _torch_dir() -> str | None:
    import sys

    torch = sys.modules.get("torch")
    return os.path.dirname(torch.__file__) if torch is not None and getattr(torch, "__file__", None) else None


def graphtool_frame(exc: BaseException) -> traceback.FrameSummary | None:
    """The frame that raised ``exc`` (or the error it wraps) when it is graphtool's own code: a bug in
    graphtool, not the user's code failing nor torch failing to trace it. Library frames a call ended in
    (the stdlib's) are skipped; errors graphtool raises on purpose in torch's place (``stands_in_for_torch``)
    are not bugs."""
    chain = exception_chain(exc)
    if any(getattr(e, "stands_in_for_torch", False) for e in chain):
        return None
    frames = [f for f in traceback.extract_tb(chain[-1].__traceback__) if not _is_stdlib(f.filename)]
    return frames[-1] if frames and frames[-1].filename.startswith(_GRAPHTOOL_DIR) else None


def graphtool_frames(exc: BaseException) -> list[traceback.FrameSummary]:
    """The frames of ``exc``'s traceback in graphtool's own code (what a bug report needs)."""
    return [f for f in traceback.extract_tb(exc.__traceback__) if f.filename.startswith(_GRAPHTOOL_DIR)]


#: where in torch a compile failed, by the torch folder of the innermost torch frame that names one
_STAGES = (("_inductor/lowering.py", "inductor lowering"), ("_inductor/graph.py", "inductor lowering"),
           ("_inductor/", "inductor"), ("_functorch/", "AOT autograd"), ("_dynamo/", "dynamo"))


def torch_stage(exc: BaseException) -> str | None:
    """Which stage of torch.compile raised ``exc``: ``dynamo``, ``AOT autograd``, ``inductor lowering`` or
    ``inductor``; None when no frame of the traceback says."""
    base = _torch_dir()
    if base is None:
        return None
    stage = None
    for e in exception_chain(exc):
        for f in traceback.extract_tb(e.__traceback__):
            if f.filename.startswith(base):
                rel = os.path.relpath(f.filename, base).replace(os.sep, "/")
                stage = next((name for part, name in _STAGES if rel.startswith(part)), stage)
    return stage


def nearest_user_frame(exc: BaseException) -> tuple[str, int] | None:
    """``(file, line)`` of the user's frame nearest to where ``exc`` was raised: the last of dynamo's
    "from user code:" frames in the message (dynamo runs the user's forward without Python frames of
    its own, so those are deeper than any on the traceback), else the innermost user frame on the traceback."""
    import re

    chain = exception_chain(exc)
    for e in reversed(chain):
        _, found, said = str(e).partition("from user code:")
        sites = [(m.group(1), int(m.group(2))) for m in re.finditer(r'File "([^"]+)", line (\d+)', said)] if found else []
        sites = [s for s in sites if _is_user_file(s[0])]
        if sites:
            return sites[-1]
    for e in reversed(chain):
        frames = user_frames(e)
        if frames:
            return frames[-1].filename, frames[-1].lineno
    return None


def user_code_error(exc: BaseException, what: str, fallback: str | None = None) -> UserCodeFailed:
    """Turn an exception raised by user code into a message at the user's innermost line (``fallback``,
    a ``file:line``, when no user frame is on the traceback: a factory called with a wrong signature)."""
    frames = user_frames(exc)
    where = f"{frames[-1].filename}:{frames[-1].lineno}: " if frames else f"{fallback}: " if fallback else ""
    detail = "".join(traceback.format_list(frames)) if frames else None
    return UserCodeFailed(f"{where}{what}: {type(exc).__name__}: {exc}", detail=detail,
                          hint=missing_package_hint(exc), full_traceback=full_traceback(exc))


#: optional packages graphtool's own examples need, and the extra that installs them (pyproject.toml)
EXTRAS = {"transformers": "examples"}
#: import names whose package on PyPI is named otherwise
PIP_NAMES = {"cv2": "opencv-python", "sklearn": "scikit-learn", "yaml": "pyyaml", "PIL": "pillow",
             "google": "protobuf", "bs4": "beautifulsoup4", "skimage": "scikit-image"}


def missing_package_hint(exc: BaseException) -> str | None:
    """What to install when the user's script imports a package that is not there, else None.

    >>> print(missing_package_hint(ModuleNotFoundError("No module named 'transformers'", name="transformers")))
    ... # doctest: +NORMALIZE_WHITESPACE
    transformers is an optional package of graphtool's examples: pip install 'torch-graphtool[examples]'
    (in a clone: pip install -c constraints.txt -e '.[examples]')
    >>> missing_package_hint(ModuleNotFoundError("No module named 'cv2'", name="cv2"))
    'cv2 is not installed in this environment: pip install opencv-python'
    """
    if not isinstance(exc, ModuleNotFoundError) or not exc.name:
        return None
    top = exc.name.partition(".")[0]
    if top != exc.name and _importable(top):  # a package that is there but lacks a part: no install fixes it
        return None
    if top in EXTRAS:
        extra = EXTRAS[top]
        return (f"{top} is an optional package of graphtool's {extra}: pip install 'torch-graphtool[{extra}]' "
                f"(in a clone: pip install -c constraints.txt -e '.[{extra}]')")
    return f"{top} is not installed in this environment: pip install {PIP_NAMES.get(top, top)}"


def _importable(name: str) -> bool:
    import importlib.util

    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


def full_traceback(exc: BaseException) -> str:
    """Every frame, for ``--debug``."""
    return "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))


class Alarm(BaseException):
    """Raised by ``--timeout``'s timer inside whatever code was running (see graphtool.capture.user.deadline):
    every user-code boundary lets it through, as it lets Ctrl-C through."""


class HardExit(BaseException):
    """Raised in place of ``os._exit(code)`` called by the user's code on graphtool's main thread."""

    def __init__(self, code):
        super().__init__(code)
        self.code = code


@contextlib.contextmanager
def os_exit_reported():
    """While user code runs, ``os._exit()`` on graphtool's main thread raises instead of ending the
    process with no word (a script calling ``os._exit(0)`` at import would otherwise exit 0 silently).
    A forked child or another thread still exits for real."""
    real = os._exit
    if getattr(real, "_graphtool_guard", False):  # already guarded by an enclosing block
        yield
        return
    pid, main = os.getpid(), threading.main_thread()

    def guarded(code):
        if os.getpid() == pid and threading.current_thread() is main:
            raise HardExit(code)
        real(code)

    guarded._graphtool_guard = True
    os._exit = guarded
    try:
        yield
    finally:
        os._exit = real


def _exit_code_text(code) -> str:
    return repr(code) if isinstance(code, str) else str(code)


def exit_error(exc: SystemExit | HardExit, what: str | None, where: str | None = None) -> UserCodeFailed:
    """``sys.exit()``/``SystemExit``/``os._exit()`` from user code as an error at the user's line (``where``,
    a file, when no user frame is on the traceback); ``what`` None: it happened somewhere graphtool ran."""
    frames = _called_user_frames(exc)
    place = f"{frames[-1].filename}:{frames[-1].lineno}: " if frames else f"{where}: " if where else ""
    call = f"{'sys.exit' if isinstance(exc, SystemExit) else 'os._exit'}({_exit_code_text(exc.code)})"
    message = f"{place}{what}: the script called {call}" if what else f"{place}the script called {call} while graphtool ran it"
    detail = "".join(traceback.format_list(frames)) if frames else None
    return UserCodeFailed(message, detail=detail, full_traceback=full_traceback(exc))


def _called_user_frames(exc: BaseException) -> list[traceback.FrameSummary]:
    """The user's frames among those graphtool called (after graphtool's innermost frame): not the
    frames of whatever called graphtool (a CLI framework, a test runner)."""
    frames = list(traceback.extract_tb(exc.__traceback__))
    while frames and frames[-1].filename.startswith(_GRAPHTOOL_DIR):  # the os._exit guard itself
        frames.pop()
    ours = [i for i, f in enumerate(frames) if f.filename.startswith(_GRAPHTOOL_DIR)]
    called = frames[ours[-1] + 1:] if ours else frames
    return [f for f in called if _is_user_file(f.filename)]


class SignalState:
    """The process's signal handlers, interval timers and blocked signals, to put back after user code.

    A script may install a ``SIGALRM`` handler that raises and start an interval timer at import,
    block ``SIGINT``, or take over ``SIGTERM``: left in place, they would fire inside graphtool (or
    torch) long after the script's own code ran. What the user's code changed is undone when it
    returns: a timer the code started is stopped, one that ran before (``--timeout``'s) goes on with
    the time it had left, and each handler and the signal mask are what they were. Only on the main
    thread (the only one that may set handlers)."""

    TIMERS = ("ITIMER_REAL", "ITIMER_VIRTUAL", "ITIMER_PROF")

    def __init__(self):
        import signal
        import time

        self.active = threading.current_thread() is threading.main_thread() and hasattr(signal, "setitimer")
        if not self.active:
            return
        self.at = time.monotonic()
        self.timers = {t: signal.getitimer(getattr(signal, t)) for t in self.TIMERS if hasattr(signal, t)}
        self.handlers = {}
        for num in signal.valid_signals():
            with contextlib.suppress(ValueError, OSError):
                handler = signal.getsignal(num)
                if handler is not None:  # None: set from C, not Python; nothing graphtool could put back
                    self.handlers[num] = handler
        self.mask = signal.pthread_sigmask(signal.SIG_BLOCK, []) if hasattr(signal, "pthread_sigmask") else None

    def restore(self) -> None:
        """Put everything back; a handler of the user's that fires meanwhile (its timer ran out just
        now) raises here, after the rest was restored, so it is reported as the user's error."""
        if not self.active:
            return
        late = None
        for _ in range(3):  # at most one late signal per timer can still arrive: then it is done again
            try:
                self._restore()
                break
            except BaseException as exc:  # the user's handler raised: kept for after
                late = late or exc
        if late is not None:
            raise late

    def _restore(self) -> None:
        import signal
        import time

        elapsed = time.monotonic() - self.at
        for name, (value, interval) in self.timers.items():
            which = getattr(signal, name)
            now_value, now_interval = signal.getitimer(which)
            if value == 0:
                if (now_value, now_interval) != (0.0, 0.0):
                    signal.setitimer(which, 0)
            elif name == "ITIMER_REAL":  # wall time (--timeout's): what was left of it, if the code changed it
                left = value - elapsed
                unchanged = now_interval == interval and (abs(now_value - left) < 0.25 if now_value else left < 0.25)
                if not unchanged:
                    signal.setitimer(which, max(left, 1e-6), interval)
        for num, handler in self.handlers.items():
            if signal.getsignal(num) is not handler:
                with contextlib.suppress(ValueError, OSError, TypeError):
                    signal.signal(num, handler)
        if self.mask is not None and signal.pthread_sigmask(signal.SIG_BLOCK, []) != self.mask:
            signal.pthread_sigmask(signal.SIG_SETMASK, self.mask)


@contextlib.contextmanager
def running_user_code(what: str, *, where: str | None = None):
    """Run a block of user code; anything it raises becomes :class:`UserCodeFailed`.

    ``what`` says what was being done ("importing model.py"); ``where`` is the file to name when
    the exception carries no user frame. ``sys.exit``/``SystemExit`` and ``os._exit`` are reported
    at the user's line that called them. Signal handlers, timers and the signal mask the code set
    are undone when it returns (see :class:`SignalState`)."""
    signals = SignalState()
    try:
        try:
            with os_exit_reported():
                yield
        finally:
            signals.restore()
    except (GraphtoolError, KeyboardInterrupt, Alarm):
        raise
    except (SystemExit, HardExit) as exc:
        raise exit_error(exc, what, where) from None
    except BaseException as exc:
        raise user_code_error(exc, what, where) from None
