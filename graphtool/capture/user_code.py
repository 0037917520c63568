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
import traceback
from pathlib import Path

from graphtool.errors import GraphtoolError, UserCodeFailed

_GRAPHTOOL_DIR = str(Path(__file__).resolve().parents[1])


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


def _is_user_file(filename: str) -> bool:
    if filename.startswith("<") or filename.startswith(_GRAPHTOOL_DIR):
        return False
    norm = filename.replace("\\", "/")
    if "/site-packages/torch/" in norm or "/importlib/" in norm or "/lib/python3" in norm and "site-packages" not in norm:
        return False
    return True


def user_code_error(exc: BaseException, what: str) -> UserCodeFailed:
    """Turn an exception raised by user code into a message at the user's innermost line."""
    frames = user_frames(exc)
    where = f"{frames[-1].filename}:{frames[-1].lineno}: " if frames else ""
    detail = "".join(traceback.format_list(frames)) if frames else None
    return UserCodeFailed(f"{where}{what}: {type(exc).__name__}: {exc}", detail=detail,
                          full_traceback=full_traceback(exc))


def full_traceback(exc: BaseException) -> str:
    """Every frame, for ``--debug``."""
    return "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))


@contextlib.contextmanager
def running_user_code(what: str, *, where: str | None = None):
    """Run a block of user code; anything it raises becomes :class:`UserCodeFailed`.

    ``what`` says what was being done ("importing model.py"); ``where`` is the file to name when
    the exception carries no user frame (a ``sys.exit`` at import)."""
    try:
        yield
    except (GraphtoolError, KeyboardInterrupt):
        raise
    except SystemExit as exc:
        place = f"{where}: " if where else ""
        raise UserCodeFailed(f"{place}{what}: the script called sys.exit({exc.code})") from None
    except BaseException as exc:
        raise user_code_error(exc, what) from None
