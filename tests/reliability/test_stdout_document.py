"""stdout carries graphtool's document and nothing else, however the user's code writes to it."""

from __future__ import annotations

import json

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


def test_the_process_stdout_is_restored_for_what_runs_after(gt, tmp_path):
    """The table still reaches stdout (the duplicate of the original descriptor), and nothing is lost."""
    script = write(tmp_path / "noisy.py", NOISY)
    proc = gt("trace", script)
    assert proc.returncode == 0, proc.stderr
    assert "noisy.py" in proc.stdout and "compiled region" in proc.stdout
    assert "raw write to fd 1" not in proc.stdout
