"""The versioned JSON Schema of graphtool's reports (package data), and the header every document carries.

Every JSON (and YAML) document a graphtool command writes starts with a ``graphtool`` header that says
which command made it, the version of that command's document, and the graphtool and torch that made
it, so a reader (``graphtool diff``) can refuse a document of another kind or from a newer graphtool::

    >>> h = header("lint")
    >>> h["command"], h["schema_version"]
    ('lint', 1)

Nothing here imports torch: the torch version is read from the running torch when it is imported, else
from the installed package's metadata (``graphtool lint`` runs torch only in its children).
"""

from __future__ import annotations

import sys

#: the key of the header in every document
HEADER = "graphtool"

#: each command's document version: raised when a key changes meaning or goes, not when one is added
DOCUMENT_VERSIONS = {
    "trace": 1, "report": 1, "mutations": 1, "devices": 1, "cudagraphs": 1, "memory": 1, "shapes": 1,
    "lint": 1, "bench": 1, "log": 1, "diff": 1,
}


def installed_torch() -> str | None:
    """The torch this process runs (or would import), without importing it; None where there is none."""
    torch = sys.modules.get("torch")
    version = getattr(torch, "__version__", None)
    if version:
        return str(version)
    from importlib import metadata

    try:
        return metadata.version("torch")
    except metadata.PackageNotFoundError:
        return None


def header(command: str, torch_version: str | None = None) -> dict:
    """The ``graphtool`` header of a document ``command`` made: ``command``, ``schema_version``,
    ``graphtool_version``, ``torch_version`` (``torch_version`` given: the torch the facts come from, a logged
    run's; else this process's)."""
    from graphtool import __version__

    return {"command": command, "schema_version": DOCUMENT_VERSIONS[command], "graphtool_version": __version__,
            "torch_version": torch_version or installed_torch()}


def stamped(command: str, document: dict, torch_version: str | None = None) -> dict:
    """``document`` with the header of ``command`` first.

    >>> list(stamped("trace", {"graphs": []}))
    ['graphtool', 'graphs']
    """
    return {HEADER: header(command, torch_version), **{k: v for k, v in document.items() if k != HEADER}}
