"""JSON and YAML text for report dicts, and whole-or-nothing file writes."""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import re
import secrets
import stat
from collections.abc import Iterable
from pathlib import Path


def format_json(data: dict) -> str:
    return json.dumps(data, indent=2, sort_keys=False, default=str) + "\n"


def format_yaml(data: dict) -> str:
    import yaml

    # through JSON first: the YAML document holds exactly the JSON one's plain values
    plain = json.loads(format_json(data))
    return yaml.safe_dump(plain, sort_keys=False, default_flow_style=False)


def format_data(data: dict, fmt: str) -> str:
    return format_yaml(data) if fmt == "yaml" else format_json(data)


def write_atomic(path: Path, text: str | bytes) -> None:
    """Write ``path`` whole or not at all.

    A regular file (or a path that does not exist yet) gets a temporary file in its folder, renamed
    over it (:func:`atomic_path`); a symlink is followed, so its target is written and the link stays a
    link; anything else that exists (``/dev/null``, ``/dev/stdout``, a FIFO, a terminal) is written to
    directly, since renaming over it would replace it with a regular file. The temporary file is
    removed on every way out, a signal included (the CLI turns SIGTERM, SIGHUP and SIGINT into
    exceptions); a SIGKILL leaves it (``.NAME.RANDOM.tmp``) beside the old file, never a torn file."""
    path = Path(path)
    data = text.encode("utf-8") if isinstance(text, str) else text
    if not regular_or_absent(path):
        _write_stream(path, data)
        return
    with atomic_path(path) as tmp:
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "wb") as fh:
                fh.write(data)
        except OSError as exc:
            raise cannot_write(path, exc) from None


def regular_or_absent(path: Path) -> bool:
    """Whether ``path`` (a symlink followed) is a regular file or a folder, or nothing yet: what
    :func:`atomic_path` may rename over; else a device, a FIFO, a terminal, to be written to directly."""
    try:
        st = os.stat(path)  # follows symlinks
    except FileNotFoundError:
        return True
    except OSError as exc:
        raise cannot_write(Path(path), exc) from None
    return stat.S_ISREG(st.st_mode) or stat.S_ISDIR(st.st_mode)


@contextlib.contextmanager
def atomic_path(path: Path):
    """A temporary name to write ``path``'s new content to (by Python, or by a program such as
    Graphviz's ``dot -o``), renamed over ``path`` when the block ends normally; removed on every other
    way out. Every file graphtool writes goes through here (tests/reliability/test_atomic_writes.py
    audits each command's writes): at any moment, a SIGKILL included, ``path`` is the old file or the
    new one.

    The temporary file sits in the target's own folder, so the rename never crosses a file system; a
    symlink's target is replaced and the link stays a link; the new file gets the old one's mode, else
    what the umask allows (the temporary file itself is private while it is written)."""
    path = Path(path)
    try:
        st = os.stat(path)  # follows symlinks
    except FileNotFoundError:
        st = None
    except OSError as exc:
        raise cannot_write(path, exc) from None
    target = Path(os.path.realpath(path))  # a symlink's target (also a dangling one's)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise cannot_write(path, exc) from None
    with temporary_path(target) as tmp:
        yield tmp
        try:
            os.chmod(tmp, stat.S_IMODE(st.st_mode) if st is not None else 0o666 & ~_umask())
            os.replace(tmp, target)
        except OSError as exc:
            raise cannot_write(path, exc) from None


def _write_stream(path: Path, data: bytes) -> None:
    try:
        with open(path, "wb") as fh:
            fh.write(data)
    except OSError as exc:
        raise cannot_write(path, exc) from None


#: temporary files being written right now: removed at exit if a ``finally`` never got to run
_PENDING: set[str] = set()


@contextlib.contextmanager
def temporary_path(target: Path):
    """A fresh temporary name beside ``target`` (``.NAME.RANDOM.tmp``), not yet created; whatever is at
    that name when the block ends (normally, by an exception, by a signal's exception) is removed."""
    tmp = str(Path(target).parent / f".{Path(target).name}.{secrets.token_hex(4)}.tmp")
    _PENDING.add(tmp)  # registered before it exists: no moment where it exists unregistered
    try:
        yield tmp
    finally:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        _PENDING.discard(tmp)


@atexit.register
def _remove_pending() -> None:
    for tmp in list(_PENDING):
        with contextlib.suppress(OSError):
            os.unlink(tmp)


def cannot_write(path: Path, exc: OSError):
    from graphtool.errors import UsageError

    why = exc.strerror or str(exc)
    if isinstance(exc, (FileExistsError, NotADirectoryError)):
        blocker = next((p for p in Path(path).parents if p.is_file()), None)
        if blocker is not None:
            why = f"{blocker} is a file, not a folder"
    return UsageError(f"cannot write {path}: {why}", hint="choose a writable output path")


def write_all(files: dict[Path, str | bytes]) -> None:
    """Write several files, each atomically; all contents are computed before the first write."""
    for path, text in files.items():
        write_atomic(path, text)


#: the mark graphtool puts in the first line of every ``.py`` file it generates
GENERATED_MARK = b"(generated by graphtool)"


def remove_earlier_run(folder: Path, keep: Iterable[Path], pattern: str, *, reports: Iterable[str] = ()) -> list[Path]:
    """Remove the files an earlier run of graphtool left in ``folder`` and this run did not write again.

    Only graphtool's own files go: a regular file whose name matches ``pattern`` (a regex on the
    whole name) and whose first line carries :data:`GENERATED_MARK`, or one of ``reports`` (names)
    that is a JSON report graphtool wrote (``graphtool_version`` and ``schema_version`` at the top).
    Any other file, a symlink and a folder stay. Returns what was removed.

    >>> import tempfile
    >>> d = Path(tempfile.mkdtemp())
    >>> _ = (d / "forward_region1.py").write_text("# forward graph (generated by graphtool)\\n")
    >>> _ = (d / "forward_region2.py").write_text("# my own notes\\n")
    >>> [p.name for p in remove_earlier_run(d, [d / "forward.py"], r"(forward|backward)(_region\\d+)?\\.py")]
    ['forward_region1.py']
    """
    keep_names = {Path(p).name for p in keep}
    removed = []
    try:
        entries = sorted(os.scandir(folder), key=lambda e: e.name)
    except OSError:
        return removed
    for entry in entries:
        if entry.name in keep_names or not entry.is_file(follow_symlinks=False):
            continue
        ours = (re.fullmatch(pattern, entry.name) and _first_line_marked(entry.path)) or (
            entry.name in reports and _is_graphtool_report(entry.path))
        if ours:
            with contextlib.suppress(OSError):
                os.unlink(entry.path)
                removed.append(Path(entry.path))
    return removed


def _first_line_marked(path: str) -> bool:
    try:
        with open(path, "rb") as fh:
            return GENERATED_MARK in fh.readline(4096)
    except OSError:
        return False


def _is_graphtool_report(path: str) -> bool:
    try:
        with open(path, "rb") as fh:
            data = json.loads(fh.read(64 * 1024 * 1024))
    except (OSError, ValueError, RecursionError):
        return False
    return isinstance(data, dict) and "graphtool_version" in data and "schema_version" in data


#: characters XML 1.0 forbids anywhere in a document, even escaped (a script's ANSI colours, NUL
#: bytes, lone surrogates): render.lint writes each as a visible ``\\x1b`` escape
XML_ILLEGAL = re.compile("[\\x00-\\x08\\x0b\\x0c\\x0e-\\x1f\\ufffe\\uffff\\ud800-\\udfff]")


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask
