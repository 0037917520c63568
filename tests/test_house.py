"""The house rules, checked by the tools that own them: import-linter's layer and cycle contracts
and ruff's lint rules, both configured in pyproject.toml."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _tool(name: str) -> str:
    found = shutil.which(name, path=str(Path(sys.executable).parent)) or shutil.which(name)
    assert found, f"{name} is not installed: pip install -e '.[test]'"
    return found


def test_import_contracts_are_kept():
    proc = subprocess.run([_tool("lint-imports"), "--no-cache"], cwd=ROOT, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "0 broken" in proc.stdout


def test_ruff_is_clean():
    proc = subprocess.run([_tool("ruff"), "check", "graphtool", "tests", "benchmarks", "scripts"], cwd=ROOT, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_architecture_doc_is_the_code():
    """docs/architecture.md is generated from the packages' docstrings and the import-linter contracts: a module
    added, moved or re-described, or a contract changed, without regenerating it fails here."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("architecture", ROOT / "scripts" / "architecture.py")
    architecture = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(architecture)
    written = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    assert written == architecture.render(), "docs/architecture.md is stale: run `python scripts/architecture.py`"
    assert "graphtool.capture.compat" in written and "```mermaid" in written
