"""Which torch graphtool runs on: its version read (from the package metadata or ``torch.__version__``)
and checked against ``graphtool.SUPPORTED_TORCH`` (too old stops, newer than tested warns once), torch
imported once through :func:`import_torch`, and what graphtool keeps from that import: torch's own
``torch.compile`` before a user script could replace it, and ``gc.freeze`` of torch's import-time objects.
Public torch only: no private symbol is looked up here."""

from __future__ import annotations

import os
import re
from typing import Any

from graphtool import SUPPORTED_TORCH
from graphtool.errors import UnsupportedTorch

_VERSION_RE = re.compile(r"^(\d+)\.(\d+)")


#: set to 1 to silence the untested-torch warning; graphtool sets it itself once it has warned,
#: so child processes (lint's) do not warn again.
_SILENCE_ENV = "GRAPHTOOL_ALLOW_UNTESTED_TORCH"


def parse_torch_version(version: str) -> tuple[int, int]:
    """``"2.13.0+cpu"`` -> ``(2, 13)``; compares as numbers, so (2, 10) > (2, 2)."""
    m = _VERSION_RE.match(version)
    if not m:
        raise UnsupportedTorch(f"cannot read the torch version {version!r}")
    return int(m.group(1)), int(m.group(2))


def check_torch_version(version: str) -> None:
    """Raise :class:`UnsupportedTorch` when ``version`` is older than the oldest supported torch.

    Newer releases than the newest tested pass: see :func:`untested_torch_message`."""
    lo, _ = SUPPORTED_TORCH
    if parse_torch_version(version) >= lo:
        return
    raise UnsupportedTorch(
        f"torch {version} is too old: graphtool needs torch {lo[0]}.{lo[1]} or newer",
        hint="upgrade torch (pip install -U torch), or see the README's \"Supported torch\"",
    )


#: torch's own torch.compile, as it was when graphtool first imported torch (before any user script
#: could replace it): what "torch.compile was replaced" is judged against
_ORIGINAL_COMPILE: Any = None


def original_compile() -> Any:
    return _ORIGINAL_COMPILE


def untested_torch_message(version: str) -> str | None:
    """The warning for a torch newer than the newest graphtool is tested with, else None."""
    _, hi = SUPPORTED_TORCH
    if parse_torch_version(version) <= hi:
        return None
    return (
        f"graphtool: warning: torch {version} is newer than the newest torch graphtool is tested "
        f"with ({hi[0]}.{hi[1]}); its results are unverified there "
        f"(set {_SILENCE_ENV}=1 to silence this warning)"
    )


def warn_if_untested_torch(version: str, stream: Any = None) -> bool:
    """Write :func:`untested_torch_message` to stderr, once per process tree; True when written.

    The one message graphtool's capture layer prints itself: every command reaches torch through
    :func:`import_torch`, so this is the only place that sees every run."""
    import sys

    msg = untested_torch_message(version)
    if msg is None or os.environ.get(_SILENCE_ENV) == "1":
        return False
    os.environ[_SILENCE_ENV] = "1"
    print(msg, file=stream if stream is not None else sys.stderr, flush=True)
    return True


def installed_torch_version() -> str | None:
    """torch's version from its package metadata, without importing torch (None if not found)."""
    from importlib import metadata

    try:
        return metadata.version("torch")
    except metadata.PackageNotFoundError:
        return None


def check_installed_torch() -> None:
    """The version check for a command that runs torch only in child processes (``lint``):
    too old exits 2 here, newer than tested warns once here rather than in every child."""
    version = installed_torch_version()
    if version is not None:
        check_torch_version(version)
        warn_if_untested_torch(version)


def import_torch():
    """Import torch, checking the version once; the error names what is wrong."""
    import warnings

    try:
        with warnings.catch_warnings():
            # the CPU wheel does not need numpy and graphtool never uses it; torch still warns
            warnings.filterwarnings("ignore", message="Failed to initialize NumPy")
            import torch
    except ImportError as exc:
        raise UnsupportedTorch(
            "torch is not installed",
            hint="pip install -c constraints.txt torch  (see the README)",
        ) from exc
    check_torch_version(torch.__version__)
    global _ORIGINAL_COMPILE
    if _ORIGINAL_COMPILE is None:
        _ORIGINAL_COMPILE = torch.compile
    warn_if_untested_torch(torch.__version__)
    return torch


def freeze_gc_after_import() -> None:
    """Move torch's import-time objects out of the collector's reach (``gc.freeze``).

    For graphtool's own short-lived processes only: dynamo's compile allocates heavily and each
    collection otherwise rescans torch's hundreds of thousands of module objects (0.1 s saved on
    a small model)."""
    import gc

    gc.freeze()
