"""The CLI starts fast: --help and --version never import torch; the console script works."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

import pytest

from tests.helpers import example


def _modules_after(args: list[str]) -> set[str]:
    code = (
        "import sys\n"
        "from graphtool.cli.main import run\n"
        f"rc = run({args!r})\n"
        "print('MODULES:' + ','.join(sorted(m for m in sys.modules if m.split('.')[0] in ('torch', 'graphviz', 'yaml'))))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    line = next(ln for ln in out.splitlines() if ln.startswith("MODULES:"))
    return {m for m in line[len("MODULES:"):].split(",") if m}


@pytest.mark.parametrize("args", [["--help"], ["--version"], ["trace", "--help"], ["cudagraphs", "--help"]])
def test_help_and_version_do_not_import_torch(args):
    assert _modules_after(args) == set()


def test_version_names_supported_torch(cli):
    rc, out, _ = cli("--version")
    assert rc == 0 and "graphtool 0." in out and "supports torch 2.11 and newer; tested with 2.11 to 2.15" in out


@pytest.mark.slow  # over 6 s: the slow tier (docs/ci.md)
def test_console_script_in_a_subprocess():
    exe = shutil.which("graphtool")
    if exe is None:
        pytest.skip("the graphtool console script is not installed (pip install -e .)")
    proc = subprocess.run([exe, "trace", example("mlp.py"), "--format", "json"], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert data["model"]["entry"] == "get_model_and_inputs"


def test_python_dash_m():
    proc = subprocess.run([sys.executable, "-m", "graphtool", "--version"], capture_output=True, text=True)
    assert proc.returncode == 0 and proc.stdout.startswith("graphtool ")


def test_bundled_example_needs_no_argument(cli):
    rc, out, _ = cli("trace")
    assert rc == 0 and "example_model.py" in out and "bn.running_mean" in out
