"""A script's signal handlers and timers do not break graphtool: what the script installed is undone
once its code returns (README, "What graphtool promises")."""

from __future__ import annotations

import json
import signal

import pytest

from tests.reliability.conftest import assert_clean, write

pytestmark = pytest.mark.skipif(not hasattr(signal, "setitimer"), reason="no interval timers on this platform")

TICKING = """\
    import signal
    import torch


    class Tick(Exception):
        pass


    def handler(signum, frame):
        raise Tick("tick")


    signal.signal(signal.SIGALRM, handler)
    signal.setitimer(signal.ITIMER_REAL, 0.5, 0.05)  # fires while graphtool traces
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    model = torch.nn.Linear(4, 4)
    example_inputs = (torch.randn(2, 4),)
    """


@pytest.mark.slow
@pytest.mark.parametrize("timeout", [None, "120"])
def test_a_script_timer_firing_while_graphtool_traces(gt, tmp_path, timeout):
    """Was: exit 142 (SIGALRM) with graphtool's own traceback, or Tick raised inside torch."""
    script = write(tmp_path / "ticking.py", TICKING)
    extra = ["--timeout", timeout] if timeout else []
    proc = gt("trace", script, "--format", "json", *extra)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["model"]["path"].endswith("ticking.py")
    assert_clean(proc.stderr)


SILENCED = """\
    import signal
    import torch

    signal.signal(signal.SIGALRM, signal.SIG_IGN)  # would make --timeout's alarm do nothing
    signal.setitimer(signal.ITIMER_REAL, 0)


    def get_model_and_inputs():
        while True:
            pass
    """


@pytest.mark.slow
def test_timeout_still_works_after_the_script_silenced_sigalrm(gt, tmp_path):
    script = write(tmp_path / "silenced.py", SILENCED)
    # the limit covers importing torch too: long enough for that on a loaded machine, so it runs out in the loop
    proc = gt("trace", script, "--timeout", "30", timeout=180)
    assert proc.returncode == 2, proc.stderr
    assert "silenced.py:9" in proc.stderr and "--timeout 30" in proc.stderr
    assert_clean(proc.stderr)
