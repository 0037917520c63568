"""--timeout for in-process commands: past the limit the work stops, naming the user's line."""

from __future__ import annotations

import signal
import textwrap

import pytest

from graphtool.capture.user.boundary import running_user_code
from graphtool.capture.user.deadline import check_timeout, deadline
from graphtool.errors import TimedOut, UsageError


def _script(tmp_path, body: str):
    path = tmp_path / "hangs.py"
    path.write_text(textwrap.dedent(body))
    return path


def _run_script(path):
    code = compile(path.read_text(), str(path), "exec")
    exec(code, {"__name__": "hangs"})


def test_an_endless_loop_at_import_names_its_line(tmp_path):
    path = _script(tmp_path, """\
        import os
        x = 0
        while True:
            x += 1
        """)
    with pytest.raises(TimedOut) as info, deadline(0.2, "importing hangs.py"), running_user_code("importing hangs.py"):
        _run_script(path)
    err = info.value
    assert err.exit_code == 2
    assert str(err).startswith(f"{path}:")
    line = int(str(err).split(":")[1])
    assert line in (3, 4)  # the loop's header or its body
    assert "still running after 0.2 s (--timeout 0.2)" in str(err)


def test_except_exception_in_the_script_cannot_swallow_it(tmp_path):
    path = _script(tmp_path, """\
        def spin():
            while True:
                try:
                    sum(range(1000))
                except Exception:
                    pass
        spin()
        """)
    with pytest.raises(TimedOut) as info, deadline(0.2, "importing hangs.py"), running_user_code("importing hangs.py"):
        _run_script(path)
    assert "in spin()" in str(info.value)


def test_a_blocking_sleep_is_cut_short(tmp_path):
    path = _script(tmp_path, "import time\ntime.sleep(60)\n")
    with pytest.raises(TimedOut) as info, deadline(0.2, "importing hangs.py"), running_user_code("importing hangs.py"):
        _run_script(path)
    assert str(info.value).startswith(f"{path}:2: ")


def test_work_within_the_limit_is_untouched_and_the_timer_is_gone():
    before = signal.getsignal(signal.SIGALRM)
    with deadline(5, "quick"):
        total = sum(range(100))
    assert total == 4950
    assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)
    assert signal.getsignal(signal.SIGALRM) is before


def test_no_user_frame_gives_a_hint(monkeypatch):
    import time

    monkeypatch.setattr("graphtool.capture.user.deadline._is_user_file", lambda filename: False)  # this test file is not "the script"

    with pytest.raises(TimedOut) as info, deadline(0.1, "tracing"):
        time.sleep(5)
    assert info.value.hint and "--timeout" in info.value.hint


@pytest.mark.parametrize("bad", [0, -1, float("nan"), float("inf")])
def test_bad_limits_are_usage_errors(bad):
    with pytest.raises(UsageError, match="greater than 0"):
        check_timeout(bad)
    with pytest.raises(UsageError), deadline(bad):
        pass


def test_none_means_no_limit():
    assert check_timeout(None) is None
    with deadline(None):
        assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)
