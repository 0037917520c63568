"""Every command's ``--help`` reads at 80 columns: no example command broken across lines (click rewraps
help paragraphs; examples go in ``\\b`` blocks, see ``graphtool.cli.options.examples``) and no line wider
than the terminal."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from graphtool.cli.main import app

ROOT = Path(__file__).resolve().parents[2]

EXAMPLE = re.compile(r"^(\w+=\S+ )*graphtool ")  # a command line, maybe after environment assignments
COMMANDS = [c.name for c in app.registered_commands]
NOT_OURS: dict[str, str] = {}  # commands whose help is known not to fit (none)


def _help(command: str) -> str:
    """As a user sees it in an 80-column terminal (CliRunner's terminal_width lays out 2 columns wider)."""
    env = {**os.environ, "COLUMNS": "80", "NO_COLOR": "1", "PYTHONPATH": str(ROOT)}
    proc = subprocess.run([sys.executable, "-m", "graphtool", command, "--help"], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def _examples(command: str) -> list[str]:
    cmd = next(c for c in app.registered_commands if c.name == command)
    lines = [ln.strip().removeprefix("\b").strip() for ln in (cmd.help or "").splitlines()]
    return [" ".join(ln.split()) for ln in lines if EXAMPLE.match(ln)]


def test_the_root_help_examples_stay_whole_at_80_columns():
    env = {**os.environ, "COLUMNS": "80", "NO_COLOR": "1", "PYTHONPATH": str(ROOT)}
    out = subprocess.run([sys.executable, "-m", "graphtool", "--help"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60).stdout
    lines = [ln.strip() for ln in out.splitlines()]
    for example in ("graphtool report model.py -o report.html   # everything, one HTML page", "graphtool trace model.py --format json"):
        assert any(ln == example or " ".join(ln.split()) == " ".join(example.split()) for ln in lines), out
    assert max(len(ln) for ln in out.splitlines()) <= 80


@pytest.mark.parametrize("columns", ["80", "60"])
def test_the_root_help_lists_every_command_whole(columns):
    # click cut each summary to fit ("...and report..."), in a pipe too
    from typer.testing import CliRunner

    out = CliRunner().invoke(app, ["--help"], env={"COLUMNS": columns, "NO_COLOR": "1"}).output
    listing = out.split("Commands:\n", 1)[1]
    assert "..." not in listing and not [ln for ln in out.splitlines() if ln.endswith(" ")]
    assert {ln.split()[0] for ln in listing.splitlines() if ln.startswith("  ") and not ln.startswith("   ")} == set(COMMANDS)


def test_every_command_is_covered():
    assert {"trace", "mutations", "devices", "cudagraphs", "render", "bench", "lint", "memory"} <= set(COMMANDS)


@pytest.mark.parametrize("command", [
    pytest.param(c, marks=pytest.mark.xfail(reason=NOT_OURS[c], strict=False)) if c in NOT_OURS else c for c in COMMANDS
])
def test_help_examples_stay_whole_at_80_columns(command):
    out = _help(command)
    printed = {" ".join(ln.split()) for ln in out.splitlines()}
    examples = _examples(command)
    assert examples, f"graphtool {command} --help shows no example"
    broken = [ex for ex in examples if ex not in printed]
    assert not broken, f"examples wrapped at 80 columns:\n{out}"
    wide = [ln for ln in out.splitlines() if len(ln) > 80]
    assert not wide, f"lines wider than 80 columns: {wide}"
