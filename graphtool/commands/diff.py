"""``graphtool diff``: what changed between two graphtool documents, or two runs; imports no torch.

Each side is a file a graphtool command wrote (``--format json``, or YAML), read whole: a file that is not
there, not JSON, not graphtool's, from a newer graphtool, or of another kind than the other side is a
UsageError (exit 2) that says what was expected. A TORCH_TRACE folder is read by ``graphtool log``'s reader
(:func:`read_log_folder`, where it plugs in).

Example::

    >>> import json, tempfile, os
    >>> head = {"command": "lint", "schema_version": 1, "graphtool_version": "0.1.0", "torch_version": "2.13.0"}
    >>> folder = tempfile.mkdtemp()
    >>> for name, breaks in (("a.json", []), ("b.json", [{"reason": "print", "code": "gb0059", "file": "m.py", "line": 3}])):
    ...     doc = {"graphtool": head, "models": [{"path": "m.py", "entry": None, "breaks": breaks, "recompiles": []}]}
    ...     _ = open(os.path.join(folder, name), "w").write(json.dumps(doc))
    >>> r = diff(os.path.join(folder, "a.json"), os.path.join(folder, "b.json"), fail_on="new-breaks")
    >>> r.exit_code(), r.summary()
    (1, 'diff failed (new-breaks): 1 new graph break')
"""

from __future__ import annotations

import contextlib
import gc
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

from graphtool.commands.result import Result
from graphtool.errors import UsageError
from graphtool.schema import stamped

#: the largest document read (a 10 MB trace of a big model is common; a 2 GB file is a mistake)
MAX_BYTES = 1 << 30


@dataclass(frozen=True, repr=False)
class DiffResult(Result):
    """Two documents compared (a :class:`~graphtool.analysis.diff.compare.DiffReport`) and its views."""

    command = "diff"

    report: Any  # DiffReport

    def to_dict(self) -> dict:
        return stamped(self.command, self.report.to_dict())

    def summary(self) -> str:
        return self.report.summary()

    def view(self):
        from graphtool.render.diff import diff_view

        return diff_view(self.report)

    def html(self) -> str:
        from graphtool.render.diff import format_html

        return format_html(self.report)

    def diagnostics(self) -> str:
        return self.text(0)

    @property
    def title(self) -> str:
        return "diff"

    @property
    def found(self) -> bool:
        """A ``--fail-on`` item got worse."""
        return not self.report.passed

    def exit_code(self) -> int:
        return self.report.exit_code()


def diff(before: str, after: str, *, fail_on: Optional[str] = None) -> DiffResult:
    """Compare the documents (or TORCH_TRACE folders) at ``before`` and ``after``; ``fail_on``
    (``new-breaks,cudagraphs,recompiles,memory:+10%``) says what getting worse fails (exit 1)."""
    from graphtool.analysis.diff import diff_documents, parse_fail_on, read_document

    items = parse_fail_on(fail_on)  # before any file is read: a wrong option costs nothing
    left = read_document(load(before), before)
    right = read_document(load(after), after)
    return DiffResult(diff_documents(left, right, items))


def load(path: str) -> object:
    """The parsed document at ``path``: JSON (or YAML, by its suffix), or a TORCH_TRACE folder read as a log."""
    p = Path(path)
    if p.is_dir():
        return read_log_folder(p)
    if not p.exists():
        raise UsageError(f"{path}: no such file", hint="give two documents a graphtool command wrote with --format json")
    try:
        size = p.stat().st_size
        if size > MAX_BYTES:
            raise UsageError(f"{path}: {size / 2**30:.1f} GiB is not a graphtool document (they are a few MB)")
        raw = p.read_bytes()
    except OSError as exc:
        raise UsageError(f"{path}: cannot read it: {exc.strerror or exc}") from None
    if not raw.strip():
        raise UsageError(f"{path}: the file is empty, not a graphtool document",
                         hint="write one with a graphtool command's --format json (its exit code says whether it could)")
    if p.suffix.lower() in (".yaml", ".yml"):
        return _yaml(raw, path)
    try:
        with _no_gc():
            return json.loads(raw)
    except UnicodeDecodeError:
        raise UsageError(f"{path}: not graphtool's JSON: not UTF-8 text", hint=_WANTED) from None
    except json.JSONDecodeError as exc:
        raise UsageError(f"{path}:{exc.lineno}:{exc.colno}: not graphtool's JSON: {exc.msg}", hint=_WANTED) from None
    except RecursionError:
        raise UsageError(f"{path}: not graphtool's JSON: nested too deeply", hint=_WANTED) from None


@contextlib.contextmanager
def _no_gc():
    """The cycle collector off while a document is parsed, and what was parsed left out of its later passes
    (``gc.freeze``): JSON makes no cycles (refcounting frees it all), and the collector's passes over the millions
    of objects a 10 MB document becomes cost as much again as the parse."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        if was:
            gc.enable()


_WANTED = "graphtool diff takes two documents a graphtool command wrote with --format json (or --format yaml, as .yaml)"


def _yaml(raw: bytes, path: str) -> object:
    import yaml

    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    try:
        return yaml.load(raw, Loader=loader)  # a safe loader: plain values only
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f":{mark.line + 1}:{mark.column + 1}" if mark is not None else ""
        raise UsageError(f"{path}{where}: not graphtool's YAML: {getattr(exc, 'problem', None) or exc}", hint=_WANTED) from None


def read_log_folder(folder: Path) -> dict:
    """A TORCH_TRACE folder as ``graphtool log`` reads it (:mod:`graphtool.capture.torch_trace`,
    :mod:`graphtool.analysis.run_log`): its document, with the ``log`` header (``graphs_compiled``, ``graph_breaks``,
    ``recompiles``, ``compile_time``, ``cudagraph_skips``, ``log``). No torch is imported."""
    from graphtool.analysis.run_log import read_run_log, wants
    from graphtool.analysis.run_log.build import READ
    from graphtool.capture.torch_trace import LogReader, log_files

    files = log_files([str(folder)])
    if not files:
        raise UsageError(f"{folder}: a folder with no TORCH_TRACE log (no *.log or *.log.gz file), not a graphtool document",
                         hint="give a TORCH_TRACE folder (TORCH_TRACE=DIR python train.py) or a graphtool command's JSON")
    facts = read_run_log(files, pictures=False, reader=LogReader(files, want=wants(False), names=READ))
    if facts.log.records == 0:
        raise UsageError(f"{folder}: not a TORCH_TRACE folder: its logs hold no structured-trace record",
                         hint="TORCH_TRACE=DIR python train.py writes the logs graphtool log and graphtool diff read")
    return stamped("log", {**facts.to_dict(), "paths": [str(folder)]}, torch_version=facts.log.torch_version)
