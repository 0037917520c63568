"""B. graphtool never hangs and never leaves a process behind: children (and what they started) are
killed on every way out, a user's non-daemon thread does not keep graphtool alive, and every number
in the options or the config is checked before it can mean "wait forever"."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.helpers import example
from tests.reliability.conftest import HOSTILE, assert_clean, graphtool_env, write


def _alive(pid: int) -> bool:
    """Whether ``pid`` is a running process, read from /proc (a zombie is not running)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return False
    return state not in ("Z", "X")


def _gone(pids: list[int], within: float = 10.0) -> bool:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if not any(_alive(p) for p in pids):
            return True
        time.sleep(0.1)
    return False


def _wait_for(path: Path, within: float = 120.0) -> list[int]:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        text = path.read_text() if path.exists() else ""
        if text.endswith("\n"):
            return [int(p) for p in text.split()]
        time.sleep(0.1)
    raise AssertionError(f"{path} was never written")


@pytest.mark.slow  # over 6 s: the slow tier (docs/ci.md)
@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads the process table from /proc")
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT, signal.SIGHUP], ids=lambda s: signal.Signals(s).name)
def test_a_signal_to_lint_kills_every_child_and_removes_the_temporary_folder(tmp_path, signum):
    marker, tmp = tmp_path / "pids", tmp_path / "tmp"
    tmp.mkdir()
    env = graphtool_env(GRAPHTOOL_TEST_MARKER=str(marker), TMPDIR=str(tmp))
    # as from a terminal: under `nohup` (SIGHUP ignored, inherited) graphtool stays deaf to SIGHUP on purpose
    proc = subprocess.Popen([sys.executable, "-m", "graphtool", "lint", str(HOSTILE / "sleeps_with_child.py")],
                            env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGHUP, signal.SIG_DFL))
    try:
        pids = _wait_for(marker)  # the lint child and the subprocess the model started
        assert all(_alive(p) for p in pids)
        assert [p.name for p in tmp.glob("graphtool-lint-*")]
        proc.send_signal(signum)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 128 + signum, err
    assert ("graphtool: interrupted" if signum == signal.SIGINT else f"terminated by {signal.Signals(signum).name}") in err
    assert_clean(err)
    assert _gone(pids), [p for p in pids if _alive(p)]
    assert list(tmp.glob("graphtool-lint-*")) == []


@pytest.mark.slow  # over 6 s: the slow tier (docs/ci.md)
@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads the process table from /proc")
def test_a_subprocess_the_model_started_goes_when_its_lint_is_done(cli, tmp_path, monkeypatch):
    marker = tmp_path / "pids"
    monkeypatch.setenv("GRAPHTOOL_TEST_MARKER", str(marker))
    rc, out, err = cli("lint", HOSTILE / "leaves_child.py", "--format", "json")
    assert rc == 0, err
    worker, child = _wait_for(marker, within=1)
    assert _gone([worker, child])


@pytest.mark.slow  # over 6 s: the slow tier (docs/ci.md)
def test_a_non_daemon_thread_in_the_script_does_not_keep_graphtool_alive(gt):
    started = time.monotonic()
    proc = gt("trace", HOSTILE / "non_daemon_thread.py", "--format", "json", timeout=240)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["model"]["path"].endswith("non_daemon_thread.py")
    assert time.monotonic() - started < 200  # the thread sleeps 600 s


@pytest.mark.slow  # over 6 s: the slow tier (docs/ci.md)
def test_a_non_daemon_thread_in_a_lint_child_does_not_cost_its_timeout(cli):
    started = time.monotonic()
    rc, out, err = cli("lint", HOSTILE / "non_daemon_thread.py", "--timeout", "120", "--format", "json")
    assert rc == 0, err
    assert json.loads(out)["models"][0]["status"] == "ok"
    assert time.monotonic() - started < 100


# -- numbers are checked --------------------------------------------------------------------------------


@pytest.mark.parametrize("args, message", [
    (["--timeout", "0"], "--timeout must be a number of seconds greater than 0, got 0"),
    (["--timeout", "-5"], "--timeout must be a number of seconds greater than 0, got -5"),
    (["--timeout", "nan"], "--timeout must be a number of seconds greater than 0, got nan"),
    (["--timeout", "inf"], "--timeout must be a number of seconds greater than 0, got inf"),
    (["--jobs", "0"], "--jobs must be 1 or more, got 0"),
    (["--jobs", "-2"], "--jobs must be 1 or more, got -2"),
    (["--max-graph-breaks", "-1"], "--max-graph-breaks must be 0 or more, got -1"),
    (["--max-recompiles", "-1"], "--max-recompiles must be 0 or more, got -1"),
    (["--max-skipped-frames", "-3"], "--max-skipped-frames must be 0 or more, got -3"),
])
def test_bad_numbers_on_the_command_line(cli, args, message):
    rc, out, err = cli("lint", example("mlp.py"), *args)
    assert rc == 2 and message in err and out == ""
    assert_clean(err)


def test_bad_render_timeout(cli, tmp_path):
    rc, _, err = cli("render", example("mlp.py"), "--timeout", "0", "-o", tmp_path / "x.svg")
    assert rc == 2 and "--timeout must be a number of seconds greater than 0, got 0" in err
    assert not (tmp_path / "x.svg").exists()


@pytest.mark.parametrize("name, text, message", [
    ("graphtool.yaml", "timeout: .nan\nmodels: [m.py]\n", "graphtool.yaml:1: timeout: must be a number of seconds greater than 0, got nan"),
    ("graphtool.yaml", "models: [m.py]\ntimeout: 0\n", "graphtool.yaml:2: timeout: must be a number of seconds greater than 0, got 0"),
    ("graphtool.yaml", "timeout: -1.5\n", "graphtool.yaml:1: timeout: must be a number of seconds greater than 0, got -1.5"),
    ("graphtool.yaml", "timeout: .inf\n", "graphtool.yaml:1: timeout: must be a number of seconds greater than 0, got inf"),
    ("graphtool.yaml", "timeout: true\n", "graphtool.yaml:1: timeout: must be int or float, got bool"),
    ("graphtool.yaml", "jobs: 0\n", "graphtool.yaml:1: jobs: must be 1 or more, got 0"),
    ("graphtool.yaml", "max_graph_breaks: -1\n", "graphtool.yaml:1: max_graph_breaks: must not be negative"),
    ("graphtool.yaml", "models:\n  - path: m.py\n    max_recompiles: -2\n", "graphtool.yaml:3: models.0.max_recompiles: must not be negative"),
    ("pyproject.toml", "[tool.graphtool]\nmodels = ['m.py']\ntimeout = nan\n",
     "pyproject.toml:3: timeout: must be a number of seconds greater than 0, got nan"),
    ("pyproject.toml", "[tool.graphtool]\njobs = 0\n", "pyproject.toml:2: jobs: must be 1 or more, got 0"),
])
def test_bad_numbers_in_the_config(cli, tmp_path, monkeypatch, name, text, message):
    write(tmp_path / "m.py", "import torch\nmodel = torch.nn.Linear(2, 2)\nexample_inputs = (torch.randn(1, 2),)\n")
    write(tmp_path / name, text)
    monkeypatch.chdir(tmp_path)
    rc, _, err = cli("lint")
    assert rc == 2 and message in err
    assert_clean(err)


BOMB = "a: &a [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{n}: &{n} [{', '.join(['*' + p] * 10)}]\n" for p, n in zip("abcdefgh", "bcdefghi")
) + "models: [m.py]\n"


@pytest.mark.parametrize("text, message", [
    (BOMB, "too large once its aliases are expanded (over 100000 values): refusing to load it"),
    ("a: &a [*a]\nmodels: [m.py]\n", "graphtool.yaml:1: an alias refers to a value that contains it"),
    ("models:\n  - path: m.py\n    allowed_breaks: " + "[" * 100_000 + "]" * 100_000 + "\n", "nested too deeply"),
], ids=["billion-laughs", "self-alias", "deep"])
def test_yaml_that_would_explode_is_refused_quickly(cli, tmp_path, monkeypatch, text, message):
    write(tmp_path / "m.py", "import torch\nmodel = torch.nn.Linear(2, 2)\nexample_inputs = (torch.randn(1, 2),)\n")
    write(tmp_path / "graphtool.yaml", text)
    monkeypatch.chdir(tmp_path)
    started = time.monotonic()
    rc, _, err = cli("lint")
    assert rc == 2 and "graphtool.yaml" in err and message in err, err
    assert time.monotonic() - started < 20
    assert_clean(err)
