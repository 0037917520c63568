"""Errors that name what to install: a package the user's script imports that is missing, and the PDF
renderer (never suggesting a package that is already installed)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from graphtool.capture.user.boundary import EXTRAS, missing_package_hint
from tests.helpers import example

ROOT = Path(__file__).resolve().parents[2]


def test_a_missing_transformers_names_the_examples_extra(cli, monkeypatch):
    monkeypatch.setitem(sys.modules, "transformers", None)  # import transformers now raises ModuleNotFoundError
    rc, out, err = cli("trace", example("hf_gpt2.py"))
    assert rc == 2 and out == ""
    assert "hf_gpt2.py:" in err and "ModuleNotFoundError" in err
    assert "hint: transformers is an optional package of graphtool's examples: pip install 'torch-graphtool[examples]'" in err


def test_any_other_missing_package_names_pip_install(cli, tmp_path):
    script = tmp_path / "needs_pkg.py"
    script.write_text("import torch\nimport graphtool_no_such_package_xyz\nmodel = torch.nn.Linear(2, 2)\n"
                      "example_inputs = (torch.randn(1, 2),)\n")
    rc, _, err = cli("trace", script)
    assert rc == 2 and "needs_pkg.py:2:" in err
    assert "hint: graphtool_no_such_package_xyz is not installed in this environment: pip install graphtool_no_such_package_xyz" in err


def test_lint_carries_the_hint_too(cli, tmp_path):
    script = tmp_path / "needs_cv.py"
    script.write_text("import torch\nimport cv2_not_here_xyz.sub\nmodel = torch.nn.Linear(2, 2)\nexample_inputs = (torch.randn(1, 2),)\n")
    rc, out, err = cli("lint", script)
    assert rc == 2 and "pip install cv2_not_here_xyz" in out + err


def test_no_hint_when_the_package_is_there_but_lacks_a_part():
    """torch is installed: a missing torch submodule is not fixed by pip install torch."""
    exc = ModuleNotFoundError("No module named 'torch.not_a_part'", name="torch.not_a_part")
    assert missing_package_hint(exc) is None
    assert missing_package_hint(ValueError("x")) is None


def test_the_extras_named_match_pyproject():
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    for module, extra in EXTRAS.items():
        assert any(req.startswith(module) for req in extras[extra]), (module, extra)


def test_pdf_without_dot_does_not_suggest_installing_graphviz_pure(cli, tmp_path, monkeypatch):
    """graphviz-pure is a dependency (installed): it draws SVG and PNG but not PDF."""
    from graphtool.render import layout

    monkeypatch.setattr(layout, "find_renderer", lambda: ("/venv/bin/graphviz-pure", "graphviz-pure"))
    rc, _, err = cli("render", example("mlp.py"), "-f", "pdf", "-o", tmp_path / "g.pdf")
    assert rc == 2 and "PDF needs Graphviz's own dot" in err
    assert "pip install graphviz-pure" not in err and "--format svg or png" in err and "apt-get install graphviz" in err
