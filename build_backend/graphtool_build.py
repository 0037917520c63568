"""graphtool's build backend: setuptools' own, with one addition to an editable install.

setuptools installs a flat-layout project in editable mode through a finder it appends to ``sys.meta_path``
(``__editable___torch_graphtool_*_finder.py``), so the ordinary path search runs first. From the folder that
holds the clone (``work/`` holding ``work/graphtool``), that search finds the clone's folder, a directory named
``graphtool`` without ``__init__.py``, and imports it as a namespace package: ``import graphtool`` then gives an
empty module and ``graphtool.trace`` an ``AttributeError`` (setuptools calls these "accidental namespace
packages" a limitation of its editable mode: pypa/setuptools#3557). A regular install has no such trouble, since
a regular package anywhere on ``sys.path`` beats a namespace portion.

So the editable wheel also carries ``__editable___graphtool_guard.py`` and a ``.pth`` that puts its finder first
on ``sys.meta_path``. The guard answers for ``graphtool`` alone, and only when the path search would not find a
regular package (nothing, or only namespace portions such as the clone's folder): then it gives the installed
package, as a regular install would. A real ``graphtool`` package earlier on ``sys.path`` (``PYTHONPATH`` pointing
at another checkout) still wins, as with any install. Every other hook is setuptools' own, unchanged.
"""

from __future__ import annotations

import base64
import hashlib
import os
import zipfile

from setuptools import build_meta as _setuptools
from setuptools.build_meta import *  # noqa: F403  (every hook PEP 517 and PEP 660 name, as setuptools gives them)

GUARD_MODULE = "__editable___graphtool_guard"
#: sorted after setuptools' ``__editable__.torch_graphtool-*.pth`` ('_' < 'g'): its finder is installed by then
GUARD_PTH = "graphtool_editable_guard.pth"

_GUARD = '''"""graphtool's editable install: ``import graphtool`` finds this checkout even where the current folder holds a
folder named graphtool without ``__init__.py`` (the clone itself), which the path search would import as an empty
namespace package ahead of setuptools' editable finder. Written by build_backend/graphtool_build.py."""
import sys
from importlib.machinery import PathFinder
from importlib.util import spec_from_file_location

PACKAGE = {package!r}


class GraphtoolNamespaceGuard:
    @classmethod
    def find_spec(cls, fullname, path=None, target=None):
        if fullname != "graphtool" or path is not None:
            return None
        found = PathFinder.find_spec(fullname)
        if found is not None and found.loader is not None:
            return None  # a regular package on sys.path comes first, as with any install
        init = PACKAGE + "/__init__.py"
        return spec_from_file_location(fullname, init, submodule_search_locations=[PACKAGE])


def install():
    if not any(getattr(f, "__name__", None) == GraphtoolNamespaceGuard.__name__ for f in sys.meta_path):
        sys.meta_path.insert(0, GraphtoolNamespaceGuard)
'''


def build_editable(wheel_directory, config_settings=None, metadata_directory=None):
    """setuptools' editable wheel, with the namespace guard added (see the module's docstring)."""
    name = _setuptools.build_editable(wheel_directory, config_settings, metadata_directory)
    package = os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, "graphtool")
    add_guard(os.path.join(wheel_directory, name), os.path.normpath(package))
    return name


def add_guard(wheel: str, package: str) -> None:
    """Add the guard's module and ``.pth`` to ``wheel`` (rewritten whole, its RECORD with their hashes)."""
    files = {f"{GUARD_MODULE}.py": _GUARD.format(package=package.replace(os.sep, "/")).encode(),
             GUARD_PTH: f"import {GUARD_MODULE}; {GUARD_MODULE}.install()\n".encode()}
    with zipfile.ZipFile(wheel) as src:
        entries = [(info, src.read(info)) for info in src.infolist()]
    record = next(info.filename for info, _ in entries if info.filename.endswith(".dist-info/RECORD"))
    lines = [f"{path},sha256={_digest(data)},{len(data)}" for path, data in files.items()]
    tmp = wheel + ".tmp"
    with zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as out:
        for info, data in entries:
            if info.filename == record:
                continue
            out.writestr(info, data)
        for path, data in files.items():
            out.writestr(path, data)
        text = next(data for info, data in entries if info.filename == record).decode()
        kept = [ln for ln in text.splitlines() if ln and not ln.startswith(record + ",")]
        out.writestr(record, "\n".join(kept + lines + [f"{record},,"]) + "\n")
    os.replace(tmp, wheel)


def _digest(data: bytes) -> str:
    return base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
