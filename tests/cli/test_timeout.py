"""--timeout on every command that runs the script in graphtool's own process: an endless loop at
import is reported at its line, exit 2 (lint has its own per-model timeout, in tests/reliability)."""

from __future__ import annotations

import signal

import pytest
import torch  # noqa: F401  (imported before the limit starts, as the real command has it by the time the script runs)

from tests.reliability.conftest import assert_clean, write

LOOP = """\
    import torch

    n = 0
    while True:
        n += 1
    """

COMMANDS = ["trace", "mutations", "devices", "cudagraphs", "bench", "memory", "render", "report"]


@pytest.mark.parametrize("command", COMMANDS)
def test_an_endless_loop_at_import_is_reported_at_its_line(cli, tmp_path, command):
    script = write(tmp_path / "spins.py", LOOP)
    extra = ["-o", str(tmp_path / "out.html")] if command == "report" else ["-o", str(tmp_path / "out.dot")] if command == "render" else []
    rc, out, err = cli(command, script, "--timeout", "0.5", *extra)
    assert rc == 2, err
    assert f"{script}:4: still running after 0.5 s (--timeout 0.5)" in err or f"{script}:5: still running" in err, err
    assert_clean(err)
    assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)  # the timer is gone
    assert not (tmp_path / "out.html").exists() and not (tmp_path / "out.dot").exists()


@pytest.mark.parametrize("value", ["0", "-1", "nan", "inf"])
@pytest.mark.parametrize("command", ["trace", "bench"])
def test_a_limit_that_is_not_a_positive_number_is_refused(cli, tmp_path, command, value):
    script = write(tmp_path / "spins.py", LOOP)
    rc, out, err = cli(command, script, "--timeout", value)
    assert rc == 2
    assert "--timeout must be a number of seconds greater than 0" in err


def test_work_within_the_limit_is_untouched(cli):
    from tests.helpers import example

    rc, out, err = cli("trace", example("mlp.py"), "--timeout", "120", "--format", "json")
    assert rc == 0, err
    assert '"graphs"' in out
