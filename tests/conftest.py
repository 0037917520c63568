"""Fixtures only; shared helpers live in tests/helpers (importable)."""

from __future__ import annotations

import pytest

# model scripts for the tests to load, several broken on purpose: never collected (--doctest-modules imports modules)
collect_ignore = ["fixtures"]

# pytest's own plugin tester, for tests/plugin (pytest accepts pytest_plugins only in a top-level conftest)
pytest_plugins = ["pytester"]


@pytest.fixture
def cli(capsys):
    """Run graphtool in-process: ``rc, out, err = cli("trace", path, "--format", "json")``."""
    from graphtool.cli.main import run

    def _run(*args: str):
        rc = run([str(a) for a in args])
        captured = capsys.readouterr()
        return rc, captured.out, captured.err

    return _run
