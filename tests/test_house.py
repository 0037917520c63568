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
    options = (ROOT / "docs" / "options.md").read_text(encoding="utf-8")
    assert options == architecture.render_options(), "docs/options.md is stale: run `python scripts/architecture.py`"
    assert "graphtool.capture.compat" in written and "```mermaid" in written


def _private_torch(path: Path) -> list[str]:
    """Where ``path`` reaches a private torch symbol: ``import torch._x``, ``from torch._x import``,
    ``from torch import _x``, or ``torch.<...>._x`` in code (a dunder such as ``torch.__version__`` is public)."""
    import ast

    def private(parts) -> bool:
        return any(p.startswith("_") and not (p.startswith("__") and p.endswith("__")) for p in parts)

    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        chain = None
        if isinstance(node, ast.Import):
            chain = next((a.name.split(".") for a in node.names if a.name.split(".")[0] == "torch"), None)
        elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "torch":
            chain = node.module.split(".") + [a.name for a in node.names]
        elif isinstance(node, ast.Attribute):
            parts, value = [node.attr], node.value
            while isinstance(value, ast.Attribute):
                parts.append(value.attr)
                value = value.value
            chain = [value.id, *reversed(parts)] if isinstance(value, ast.Name) and value.id == "torch" else None
        if chain and private(chain[1:]) and not any(f.startswith(f"{path.name}:{node.lineno}:") for f in found):
            found.append(f"{path.name}:{node.lineno}: {'.'.join(chain)}")
    return found


def test_only_capture_compat_touches_private_torch(tmp_path):
    """docs/architecture.md's claim, checked: every other module reaches torch's private symbols through
    graphtool.capture.compat."""
    compat = ROOT / "graphtool" / "capture" / "compat"
    files = [p for p in (ROOT / "graphtool").rglob("*.py") if compat not in p.parents]
    assert len(files) > 100
    assert [hit for p in files for hit in _private_torch(p)] == []
    bad = tmp_path / "probe.py"  # the check above sees each way in
    bad.write_text("import torch._dynamo\nfrom torch import _inductor\nimport torch\ntorch._dynamo.reset()\n"
                   "print(torch.__version__, torch.fx.Graph)\n")
    assert sorted(h.split(": ")[0] for h in _private_torch(bad)) == ["probe.py:1", "probe.py:2", "probe.py:4"]
