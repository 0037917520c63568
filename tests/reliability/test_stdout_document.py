"""stdout carries graphtool's document and nothing else, however the user's code writes to it."""

from __future__ import annotations

import json
import os

import pytest

from tests.reliability.conftest import assert_clean, write

NOISY = """\
    import os, subprocess, sys, threading
    import torch

    os.write(1, b"raw write to fd 1\\n")
    print("a print at import")
    sys.stdout.write("sys.stdout.write\\n")
    t = threading.Thread(target=lambda: print("a print from a thread"))
    t.start(); t.join()
    subprocess.run([sys.executable, "-c", "print('a child process')"], check=True)


    def get_model_and_inputs():
        os.write(1, b"raw write in the factory\\n")
        return torch.nn.Linear(4, 4), (torch.randn(2, 4),)
    """

WRITES = ("raw write to fd 1", "a print at import", "sys.stdout.write", "a print from a thread", "a child process",
          "raw write in the factory")


@pytest.mark.slow  # over 5 s: the slow tier (docs/ci.md)
@pytest.mark.parametrize("fmt", ["json", "yaml"])
def test_everything_the_script_writes_goes_to_stderr(gt, tmp_path, fmt):
    script = write(tmp_path / "noisy.py", NOISY)
    proc = gt("trace", script, "--format", fmt)
    assert proc.returncode == 0, proc.stderr
    if fmt == "json":
        doc = json.loads(proc.stdout)  # was: "raw write to fd 1\na child process\n{..." (not JSON)
    else:
        import yaml

        doc = yaml.safe_load(proc.stdout)
    assert doc["model"]["path"].endswith("noisy.py")
    for text in WRITES:
        assert text not in proc.stdout
        assert text in proc.stderr
    assert_clean(proc.stderr)


@pytest.mark.slow  # over 5 s: the slow tier (docs/ci.md)
def test_the_table_reaches_the_real_stdout_and_nothing_else_does(gt, tmp_path):
    """The table goes to the duplicate of the original descriptor 1; descriptor 1 itself stays on
    stderr until the process ends (what still runs after the report must not write after it)."""
    script = write(tmp_path / "noisy.py", NOISY)
    proc = gt("trace", script)
    assert proc.returncode == 0, proc.stderr
    assert "noisy.py" in proc.stdout and "compiled region" in proc.stdout
    assert "raw write to fd 1" not in proc.stdout


CHATTY_THREAD = """\
    import os, sys, threading, time
    import torch


    def chatter():  # keeps writing while graphtool traces, renders and exits
        while True:
            print("thread print")
            sys.stdout.buffer.write(b"thread buffer write\\n")
            os.write(sys.stdout.fileno(), b"thread fileno write\\n")
            os.write(1, b"thread fd 1\\n")
            time.sleep(0.002)


    threading.Thread(target=chatter, daemon=True).start()
    model = torch.nn.Linear(4, 4)
    example_inputs = (torch.randn(2, 4),)
    """


@pytest.mark.slow
def test_a_thread_that_keeps_printing_goes_to_stderr(gt, tmp_path):
    """sys.stdout is one object for all threads: a user thread printing after the script was imported
    (while graphtool traces, writes its document, exits) wrote into the document."""
    proc = gt("trace", write(tmp_path / "chatty.py", CHATTY_THREAD), "--format", "json")
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)  # was: "Extra data" (thread prints between and after the JSON)
    assert doc["model"]["path"].endswith("chatty.py")
    for text in ("thread print", "thread buffer write", "thread fileno write", "thread fd 1"):
        assert text not in proc.stdout
        assert text in proc.stderr


FORKED_CHILD = """\
    import os, threading, time
    import torch

    if os.fork() == 0:  # the child goes on with the import, and then with graphtool's whole run
        def chatter():
            for _ in range(200):
                print("child thread print", flush=True)
                time.sleep(0.005)

        threading.Thread(target=chatter).start()
        print("child print")

    model = torch.nn.Linear(4, 4)
    example_inputs = (torch.randn(2, 4),)
    """


@pytest.mark.slow
@pytest.mark.skipif(not hasattr(os, "fork"), reason="no os.fork on this platform")
def test_a_child_forked_at_import_cannot_write_into_the_document(gt, tmp_path):
    """A forked child inherits graphtool's duplicate of the real stdout: the child (and the second
    graphtool run it went on with) wrote a second document and its prints into stdout."""
    proc = gt("trace", write(tmp_path / "forks.py", FORKED_CHILD), "--format", "json")
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)  # was: "child thread print\n{...}{...}" (two documents)
    assert doc["model"]["path"].endswith("forks.py")
    assert "child print" not in proc.stdout and "child thread print" not in proc.stdout
    assert "child print" in proc.stderr
