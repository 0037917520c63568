"""Helpers for the hostile-input tests: graphtool as a real process, and the checks every case shares."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.helpers import FIXTURES, ROOT

HOSTILE = FIXTURES / "hostile"


def write(path: Path, text: str | bytes) -> Path:
    """Write a dedented script (or raw bytes) and return its path."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(textwrap.dedent(text).lstrip("\n"))
    return path


def assert_clean(err: str) -> None:
    """No traceback and none of graphtool's own frames in what the user sees."""
    assert "Traceback (most recent call last)" not in err, err
    assert not re.search(r"graphtool/(capture|cli|commands|render|analysis|config\.py)", err), err
    assert "Exception ignored" not in err, err


def graphtool_env(**extra: str) -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    env.pop("GRAPHTOOL_DEBUG", None)
    env.update(extra)
    return env


@pytest.fixture
def gt():
    """Run ``python -m graphtool ARGS`` as its own process: ``proc = gt("trace", path, cwd=...)``."""

    def _run(*args, cwd=None, env=None, timeout=300, **kw) -> subprocess.CompletedProcess:
        kw.setdefault("capture_output", True)
        return subprocess.run([sys.executable, "-m", "graphtool", *map(str, args)], cwd=cwd, env=env or graphtool_env(),
                              text=True, timeout=timeout, stdin=subprocess.DEVNULL, **kw)

    return _run
