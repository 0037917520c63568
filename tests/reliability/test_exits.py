"""C. Never a silent pass: a script that ends the interpreter, a KeyboardInterrupt at import, a stdout
that is closed, full or whose reader went away, each give a clear exit code and no traceback.
F. A MODEL path that does not exist is refused before torch is imported."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest

from tests.helpers import example
from tests.reliability.conftest import assert_clean, graphtool_env, write

HARD_EXIT = "import os\n\nimport torch\n\nos._exit(0)\n"


def test_os_exit_at_import_is_an_error_in_process(cli, tmp_path):
    script = write(tmp_path / "quits.py", HARD_EXIT)
    rc, out, err = cli("trace", script, "--format", "json")
    assert rc == 2 and out == ""
    assert "quits.py:5: importing quits.py failed: the script called os._exit(0)" in err
    assert_clean(err)


def test_os_exit_at_import_is_an_error_in_a_lint_child(cli, tmp_path):
    script = write(tmp_path / "quits.py", HARD_EXIT)
    rc, out, err = cli("lint", script, "--format", "json")
    m = json.loads(out)["models"][0]
    assert rc == 2 and m["status"] == "error"
    assert "quits.py:5" in m["error"] and "os._exit(0)" in m["error"]


def test_a_child_that_ends_itself_before_reporting_is_an_error(cli, tmp_path):
    # os._exit from a thread, which no guard can turn into an exception: the child just ends with status 0
    script = write(tmp_path / "thread_quits.py", """
        import os
        import threading

        threading.Thread(target=os._exit, args=(0,)).start()
        threading.Event().wait(60)
    """)
    rc, out, _ = cli("lint", script, "--format", "json")
    m = json.loads(out)["models"][0]
    assert rc == 2 and m["status"] == "error"
    assert "exited with status 0 before graphtool could report anything" in m["error"]


@pytest.mark.parametrize("call", ["sys.exit(0)", "os._exit(0)", "raise SystemExit"])
@pytest.mark.parametrize("command", ["trace", "mutations"])
def test_exiting_from_the_forward_is_an_error_at_its_line(cli, tmp_path, call, command):
    script = write(tmp_path / "exits_in_forward.py", f"""
        import os
        import sys

        import torch


        class M(torch.nn.Module):
            def forward(self, x):
                {call}


        model = M()
        example_inputs = (torch.randn(2),)
    """)
    rc, out, err = cli(command, script, "--format", "json")
    assert rc == 2 and out == ""
    shown = call.replace("raise SystemExit", "sys.exit(None)")
    assert f"exits_in_forward.py:9: the script called {shown} while graphtool ran it" in err, err
    assert_clean(err)


def test_keyboard_interrupt_at_import_says_interrupted(gt, tmp_path):
    script = write(tmp_path / "ctrl_c.py", "import torch\n\nraise KeyboardInterrupt\n")
    proc = gt("trace", script)
    assert proc.returncode == 130
    assert "graphtool: interrupted" in proc.stderr
    assert_clean(proc.stderr)


@pytest.mark.slow  # over 5 s: the slow tier (docs/ci.md)
def test_a_reader_that_went_away(tmp_path):
    """``graphtool trace --format json | head -c 10``: the pipe is closed before graphtool writes."""
    proc = subprocess.Popen([sys.executable, "-m", "graphtool", "trace", example("mlp.py"), "--format", "json"],
                            env=graphtool_env(), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    proc.stdout.close()  # the reader is gone before the first byte
    err = proc.stderr.read().decode()
    proc.wait(300)
    assert proc.returncode == 141, err
    assert "BrokenPipeError" not in err
    assert_clean(err)


@pytest.mark.slow  # over 8 s: the slow tier (docs/ci.md)
def test_a_reader_that_stops_after_ten_bytes(tmp_path):
    shell = f"{sys.executable} -m graphtool trace {example('transformer.py')} --format yaml | head -c 10; echo \" rc=${{PIPESTATUS[0]}}\""
    proc = subprocess.run(["bash", "-c", shell], env=graphtool_env(), capture_output=True, text=True, timeout=300)
    assert proc.stdout.endswith((" rc=141\n", " rc=0\n")), proc.stdout  # 0: everything fit in the pipe first
    assert len(proc.stdout.split(" rc=")[0]) == 10
    assert_clean(proc.stderr)


@pytest.mark.slow  # over 8 s: the slow tier (docs/ci.md)
def test_a_full_stdout(gt):
    with open("/dev/full", "w") as full:
        proc = gt("trace", example("mlp.py"), "--format", "json", stdout=full, stderr=subprocess.PIPE, capture_output=False)
    assert proc.returncode == 2
    assert "graphtool: error: cannot write the output to stdout: No space left on device" in proc.stderr
    assert_clean(proc.stderr)


@pytest.mark.slow  # over 8 s: the slow tier (docs/ci.md)
def test_a_closed_stdout(tmp_path):
    shell = f"exec {sys.executable} -m graphtool trace {example('mlp.py')} --format json >&-"
    proc = subprocess.run(["bash", "-c", shell], env=graphtool_env(), capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2
    assert "graphtool: error: cannot write the output: stdout is closed" in proc.stderr
    assert_clean(proc.stderr)


@pytest.mark.slow  # over 5 s: the slow tier (docs/ci.md)
def test_a_closed_stdout_is_fine_when_nothing_goes_to_it(tmp_path):
    report = tmp_path / "r.json"
    shell = f"exec {sys.executable} -m graphtool lint {example('mlp.py')} --format json -o {report} >&-"
    proc = subprocess.run(["bash", "-c", shell], env=graphtool_env(), capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(report.read_text())["passed"] is True


# -- F: a wrong path costs no torch import -------------------------------------------------------------


@pytest.mark.parametrize("args, message", [
    (["trace", "no/such/model.py"], "no/such/model.py: no such file"),
    (["trace", "README.md"], "README.md: not a Python script"),
    (["lint", "examples/mlp.py", "no/such/model.py"], "no/such/model.py: no such file"),
    (["lint", "--run", "no/such/train.py"], "no/such/train.py: no such file"),
])
def test_a_missing_model_is_refused_before_torch_is_imported(args, message):
    from tests.helpers import ROOT

    code = (
        "import sys, time\n"
        "from graphtool.cli.main import run\n"
        f"rc = run({args!r})\n"
        "print('RESULT', rc, 'torch' in sys.modules)\n"
    )
    started = time.monotonic()
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=graphtool_env(), capture_output=True, text=True, timeout=120)
    assert "RESULT 2 False" in proc.stdout, proc.stdout + proc.stderr
    assert message in proc.stderr
    assert time.monotonic() - started < 30
    assert_clean(proc.stderr)
