"""``--timeout`` for the commands that run the user's code in graphtool's own process.

A script with an endless loop at import, a factory that waits on a lock forever, a forward that
never returns: past the limit, :func:`deadline` stops the work and raises :class:`TimedOut` (exit 2)
naming the user's line that was running, so the user sees *where* it hung, not only that it did.

The limit is a ``SIGALRM`` timer on the main thread. Python runs the alarm's handler between two
bytecodes, so a loop in Python stops at once; a single C call (one huge matrix multiply, a blocking
``time.sleep``) is interrupted when it returns or, for sleeps and most blocking reads, at once
(PEP 475 retries them only when the handler returns normally). The handler raises :class:`_Alarm`,
a ``BaseException``, so a user's ``except Exception:`` cannot swallow it.

Example::

    >>> import time
    >>> with deadline(0.05, "sleeping"):
    ...     time.sleep(5)
    Traceback (most recent call last):
    graphtool.errors.TimedOut: sleeping: still running after 0.05 s (--timeout 0.05)
"""

from __future__ import annotations

import contextlib
import math
import signal
import threading
import traceback

from graphtool.capture.user.boundary import Alarm as _Alarm
from graphtool.capture.user.boundary import _is_user_file, full_traceback
from graphtool.errors import TimedOut, UsageError


def check_timeout(seconds: float | None, option: str = "--timeout") -> float | None:
    """``seconds`` as given, or a :class:`UsageError` for 0, a negative number, NaN or infinity."""
    if seconds is None:
        return None
    if not (isinstance(seconds, (int, float)) and math.isfinite(seconds) and seconds > 0):
        raise UsageError(f"{option} must be a number of seconds greater than 0, got {seconds:g}" if isinstance(seconds, (int, float))
                         else f"{option} must be a number of seconds greater than 0, got {seconds!r}")
    return float(seconds)


def _shown(seconds: float) -> str:
    return f"{seconds:g}"


@contextlib.contextmanager
def deadline(seconds: float | None, what: str = ""):
    """Run the block for at most ``seconds`` (None: no limit). Off the main thread, or where the
    platform has no ``SIGALRM``, the block runs without a limit (nothing else can stop Python code)."""
    seconds = check_timeout(seconds)
    if seconds is None or threading.current_thread() is not threading.main_thread() or not hasattr(signal, "setitimer"):
        yield
        return

    def _handler(signum, frame):
        raise _Alarm()

    previous = signal.signal(signal.SIGALRM, _handler)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    except _Alarm as alarm:
        raise _timed_out(alarm, seconds, what) from None
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def _timed_out(alarm: _Alarm, seconds: float, what: str) -> TimedOut:
    frames = [f for f in traceback.extract_tb(alarm.__traceback__) if _is_user_file(f.filename)]
    own = [f for f in frames if "site-packages" not in f.filename.replace("\\", "/")]
    if own:  # the script's own line (it was importing a library, say), rather than inside that library
        frames = own
    where = f"{frames[-1].filename}:{frames[-1].lineno}: " if frames else ""
    running = f" in {frames[-1].name}()" if frames and frames[-1].name != "<module>" else ""
    rank = getattr(alarm, "on_rank", None)  # set by graphtool.capture.distributed.ranks.on_rank: the rank it stopped in
    return TimedOut(
        f"{rank + ': ' if rank else ''}{where}{what + ': ' if what else ''}still running after {_shown(seconds)} s (--timeout {_shown(seconds)}){running}",
        detail="".join(traceback.format_list(frames)) if frames else None,
        hint=None if frames else "the time ran out inside torch or graphtool, not in the script's own code; "
                                 "a larger model may need a larger --timeout",
        full_traceback=full_traceback(alarm),
    )
