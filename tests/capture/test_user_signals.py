"""What the user's code does to signals is undone when it returns to graphtool (hostile input class:
user signal handlers and timers). Fast, in-process; tests/reliability/test_user_signals.py runs
whole scripts."""

from __future__ import annotations

import signal
import time

import pytest

from graphtool.capture.user.boundary import running_user_code
from graphtool.capture.user.deadline import deadline
from graphtool.errors import TimedOut

pytestmark = pytest.mark.skipif(not hasattr(signal, "setitimer"), reason="no interval timers on this platform")


class Tick(Exception):
    pass


def _raise_tick(signum, frame):
    raise Tick("tick")


def test_a_handler_and_interval_timer_the_code_installed_are_undone():
    before = signal.getsignal(signal.SIGALRM)
    with running_user_code("importing hostile.py"):
        signal.signal(signal.SIGALRM, _raise_tick)
        signal.setitimer(signal.ITIMER_REAL, 5.0, 0.05)
        signal.setitimer(signal.ITIMER_PROF, 5.0, 0.05)
    assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)
    assert signal.getitimer(signal.ITIMER_PROF) == (0.0, 0.0)
    assert signal.getsignal(signal.SIGALRM) is before


def test_handlers_for_other_signals_and_the_mask_are_undone():
    term = signal.getsignal(signal.SIGTERM)
    mask = signal.pthread_sigmask(signal.SIG_BLOCK, [])
    try:
        with running_user_code("importing hostile.py"):
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
            signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGINT])
        assert signal.getsignal(signal.SIGTERM) is term
        assert signal.pthread_sigmask(signal.SIG_BLOCK, []) == mask
    finally:
        signal.signal(signal.SIGTERM, term)
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)


def test_the_timeout_goes_on_when_the_code_replaced_its_timer():
    """--timeout's SIGALRM timer, replaced by the script's own, is put back with the time it had left."""
    with pytest.raises(TimedOut):
        with deadline(0.3, "loading x.py"):
            with running_user_code("importing x.py"):
                signal.signal(signal.SIGALRM, signal.SIG_IGN)  # the script silences SIGALRM...
                signal.setitimer(signal.ITIMER_REAL, 0)  # ...and stops every timer
            end = time.monotonic() + 5
            while time.monotonic() < end:  # graphtool's own work, past the limit
                pass
    assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)


def test_a_handler_firing_as_the_code_returns_is_the_users_error():
    from graphtool.errors import UserCodeFailed

    before = signal.getsignal(signal.SIGALRM)
    with pytest.raises(UserCodeFailed, match="Tick: tick"):
        with running_user_code("importing hostile.py"):
            signal.signal(signal.SIGALRM, _raise_tick)
            signal.setitimer(signal.ITIMER_REAL, 0.01, 0.01)
            time.sleep(1)
    assert signal.getsignal(signal.SIGALRM) is before
    assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)
