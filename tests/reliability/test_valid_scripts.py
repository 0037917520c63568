"""E. Valid scripts are not rejected: a model inside a package with relative imports, a UTF-8 BOM, a
PEP 263 coding line — each read and imported the way Python itself does."""

from __future__ import annotations

import json

import pytest

from tests.reliability.conftest import assert_clean, write

LAYERS = """
import torch


class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(4, 4)

    def forward(self, x):
        return self.fc(x).relu()
"""


def _package(root):
    write(root / "mypkg" / "__init__.py", "")
    write(root / "mypkg" / "layers.py", LAYERS)
    write(root / "mypkg" / "nets" / "__init__.py", "from .. import layers  # noqa: F401\n")
    write(root / "mypkg" / "model.py", """
        import torch

        from .layers import Block

        model = Block()
        example_inputs = (torch.randn(2, 4),)
    """)
    write(root / "mypkg" / "nets" / "deep.py", """
        import torch

        from ..layers import Block
        from . import __name__ as parent


        def get_model_and_inputs():
            assert parent == "mypkg.nets", parent
            return Block(), (torch.randn(2, 4),)
    """)


@pytest.mark.parametrize("script", ["mypkg/model.py", "mypkg/nets/deep.py"])
def test_a_model_in_a_package_with_relative_imports(cli, tmp_path, monkeypatch, script):
    _package(tmp_path)
    monkeypatch.chdir(tmp_path)
    rc, out, err = cli("trace", script, "--format", "json", "--inference")
    assert rc == 0, err
    assert json.loads(out)["graphs"][0]["forward"]["ops"]
    rc, out, err = cli("lint", script, "--format", "json")
    assert rc == 0, err
    assert json.loads(out)["models"][0]["status"] == "ok"


def test_a_package_named_like_an_imported_module_is_a_clear_error(cli, tmp_path):
    write(tmp_path / "json" / "__init__.py", "")
    script = write(tmp_path / "json" / "model.py", "from . import x\n")
    rc, _, err = cli("trace", script)
    assert rc == 2 and "its package 'json'" in err and "clashes with the module 'json' already imported" in err
    assert_clean(err)


SIMPLE = "import torch\n\nmodel = torch.nn.Linear(4, 4)\nexample_inputs = (torch.randn(2, 4),)\n"


@pytest.mark.parametrize("name, content", [
    ("bom.py", b"\xef\xbb\xbf" + SIMPLE.encode()),
    ("latin1.py", b"# -*- coding: latin-1 -*-\n# caf\xe9\n" + SIMPLE.encode() + b"name = 'caf\xe9'\n"),
    ("cp1252_bom_free.py", b"# vim: set fileencoding=cp1252 :\n" + SIMPLE.encode() + b"quote = '\x93hi\x94'\n"),
])
def test_source_encodings_python_accepts(cli, tmp_path, name, content):
    script = write(tmp_path / name, content)
    rc, out, err = cli("trace", script, "--format", "json", "--inference")
    assert rc == 0, err
    assert json.loads(out)["model"]["entry"] == "model"
    rc, out, err = cli("lint", script, "--format", "json")
    assert rc == 0, err


def test_a_wrong_coding_line_is_a_syntax_error_at_its_line(cli, tmp_path):
    script = write(tmp_path / "bad_coding.py", b"# -*- coding: no-such-codec -*-\nimport torch\n")
    rc, _, err = cli("trace", script)
    assert rc == 2 and "bad_coding.py" in err and "syntax error" in err and "no-such-codec" in err
    assert_clean(err)
    script = write(tmp_path / "not_utf8.py", b"import torch\nx = 'caf\xe9'\n")
    rc, _, err = cli("trace", script)
    assert rc == 2 and "not_utf8.py:2: syntax error" in err
    assert_clean(err)


@pytest.mark.slow  # over 5 s (a lint child, or a script run in its own process)
def test_relative_imports_without_init_files_use_namespace_packages(cli, tmp_path, monkeypatch):
    write(tmp_path / "proj" / "layers.py", LAYERS)
    write(tmp_path / "proj" / "nets" / "model.py", """
        import torch

        from ..layers import Block

        model = Block()
        example_inputs = (torch.randn(2, 4),)
    """)
    monkeypatch.chdir(tmp_path)
    rc, out, err = cli("trace", "proj/nets/model.py", "--format", "json", "--inference")
    assert rc == 0, err
    rc, out, err = cli("lint", "proj/nets/model.py", "--format", "json")
    assert rc == 0 and json.loads(out)["models"][0]["status"] == "ok", err
