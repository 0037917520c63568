"""An editable install imports from anywhere, also from the folder that holds the clone (issue 44).

``work/`` holding the clone ``work/graphtool`` (the repository folder named graphtool, as ``git clone`` names it): the
path search finds that folder first and, with no ``__init__.py`` in it, makes it an empty namespace package ahead of
setuptools' editable finder, so ``import graphtool`` gave a module with no ``trace``. The build backend
(build_backend/graphtool_build.py) adds a guard to the editable wheel; here a real ``pip install -e`` into a fresh
environment, in that layout.
"""

from __future__ import annotations

import base64
import hashlib
import os
import shutil
import subprocess
import sys
import zipfile

import pytest

from tests.helpers import ROOT

#: what an install reads from the clone
CLONE = ("pyproject.toml", "README.md", "MANIFEST.in", "build_backend", "graphtool")
SHOW = "import graphtool; print(graphtool.__file__); print(graphtool.__version__)"


def _clone(into):
    """``into/graphtool``: the files an install reads, as a clone holds them."""
    clone = into / "graphtool"
    clone.mkdir(parents=True)
    for name in CLONE:
        src = ROOT / name
        if src.is_dir():
            shutil.copytree(src, clone / name, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
        else:
            shutil.copy2(src, clone / name)
    return clone


@pytest.mark.slow  # a fresh environment and a real pip install -e, ~15 s: the slow tier (docs/ci.md)
def test_import_graphtool_from_the_folder_that_holds_the_clone(tmp_path):
    work = tmp_path / "work"
    clone = _clone(work)
    env_dir = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(env_dir)], check=True)
    python = env_dir / ("Scripts/python.exe" if os.name == "nt" else "bin/python")
    install = subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "-q", "--no-deps", "-e", str(clone)],
                             capture_output=True, text=True)
    assert install.returncode == 0, install.stderr
    clean = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}

    def run(cwd, **env):
        return subprocess.run([str(python), "-c", SHOW], cwd=cwd, capture_output=True, text=True, env={**clean, **env})

    here = run(work)  # the folder that holds the clone: 'graphtool' there is the clone's folder
    assert here.returncode == 0, here.stderr  # AttributeError: module 'graphtool' has no attribute '__version__' before
    assert here.stdout.splitlines() == [str(clone / "graphtool" / "__init__.py"), _version()]
    inside = run(clone)  # the clone itself: its package folder is the current folder's
    assert inside.stdout.splitlines()[0] == str(clone / "graphtool" / "__init__.py")
    other = run(tmp_path, PYTHONPATH=str(ROOT))  # another checkout on PYTHONPATH still comes first, as with any install
    assert other.stdout.splitlines()[0] == str(ROOT / "graphtool" / "__init__.py"), other.stderr


def _version() -> str:
    import graphtool

    return graphtool.__version__


def test_the_guard_joins_the_wheel_with_its_hashes_in_the_record(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(ROOT / "build_backend"))
    import graphtool_build

    wheel = tmp_path / "w-0.1-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as z:
        z.writestr("a.pth", "x\n")
        z.writestr("w-0.1.dist-info/RECORD", "a.pth,sha256=abc,2\nw-0.1.dist-info/RECORD,,\n")
    graphtool_build.add_guard(str(wheel), "/src/graphtool")
    with zipfile.ZipFile(wheel) as z:
        record = z.read("w-0.1.dist-info/RECORD").decode().splitlines()
        assert record[0] == "a.pth,sha256=abc,2" and record[-1] == "w-0.1.dist-info/RECORD,,"
        for line in record[1:-1]:
            path, digest, size = line.split(",")
            data = z.read(path)
            assert digest == "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
            assert int(size) == len(data)
        assert z.read("graphtool_editable_guard.pth").decode().startswith("import __editable___graphtool_guard")
        assert "PACKAGE = '/src/graphtool'" in z.read("__editable___graphtool_guard.py").decode()
