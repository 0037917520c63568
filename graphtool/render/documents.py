"""JSON and YAML text for report dicts, and whole-or-nothing file writes."""

from __future__ import annotations

import json
import os
import tempfile
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
    """Write ``path`` whole or not at all: a temporary file in the same folder, then rename."""
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    except OSError as exc:
        raise cannot_write(path, exc) from None
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(text.encode("utf-8") if isinstance(text, str) else text)
        os.chmod(tmp, 0o666 & ~_umask())  # mkstemp makes 0600; a written report is an ordinary file
        os.replace(tmp, path)
    except BaseException as exc:
        if os.path.exists(tmp):
            os.unlink(tmp)
        if isinstance(exc, OSError):
            raise cannot_write(path, exc) from None
        raise


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


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask
