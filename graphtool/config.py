"""The project config: ``graphtool.yaml`` in the project root, or ``[tool.graphtool]`` in pyproject.toml.

    max_graph_breaks: 0          # defaults for every model
    max_recompiles: 1
    baseline: graphtool-baseline.json
    models:
      - path: examples/mlp.py
      - path: models/llama.py
        entry: build
        max_graph_breaks: 2
        dynamic: true
        allowed_breaks: ["print", "Tensor\\\\.item"]

Read with yaml safe loading and validated: an unknown key, a wrong type or a missing file is a
:class:`ConfigError` naming the file, the key and the line (exit 2). Paths are relative to the
config file's folder.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from graphtool.errors import ConfigError

MODEL_KEYS = {
    "path": str, "entry": str, "max_graph_breaks": int, "max_recompiles": int, "max_skipped_frames": int, "dynamic": bool,
    "allowed_breaks": list,
}
TOP_KEYS = {
    "models": list, "max_graph_breaks": int, "max_recompiles": int, "max_skipped_frames": int, "dynamic": bool,
    "allowed_breaks": list,
    "baseline": str, "jobs": int, "timeout": (int, float),
}


@dataclass(frozen=True)
class ModelEntry:
    path: Path
    entry: str | None
    max_graph_breaks: int | None
    max_recompiles: int | None
    dynamic: bool
    allowed_breaks: tuple[str, ...]
    max_skipped_frames: int | None = None


@dataclass(frozen=True)
class Config:
    file: Path
    models: tuple[ModelEntry, ...]
    baseline: Path | None
    jobs: int | None
    timeout: float | None


def find_config(start: Path | None = None) -> Path | None:
    """``graphtool.yaml`` (or ``.yml``) in ``start``, else a pyproject.toml with [tool.graphtool]."""
    folder = Path(start or Path.cwd())
    for name in ("graphtool.yaml", "graphtool.yml"):
        if (folder / name).is_file():
            return folder / name
    pyproject = folder / "pyproject.toml"
    if pyproject.is_file() and re.search(r"^\[tool\.graphtool", pyproject.read_text(encoding="utf-8"), re.M):
        return pyproject
    return None


def load_config(path: Path) -> Config:
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"{path}: no such config file")
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".toml":
        data, lines = _load_toml(path, text)
    else:
        data, lines = _load_yaml(path, text)
    return _validate(path, data, lines)


def _load_yaml(path: Path, text: str) -> tuple[Any, dict]:
    import yaml

    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = f":{mark.line + 1}" if mark else ""
        raise ConfigError(f"{path}{line}: not valid YAML: {getattr(exc, 'problem', exc)}") from None
    lines: dict[tuple, int] = {}
    _yaml_lines(node, (), lines)
    return data if data is not None else {}, lines


def _yaml_lines(node, prefix: tuple, lines: dict) -> None:
    import yaml

    if isinstance(node, yaml.MappingNode):
        for key, value in node.value:
            k = prefix + (key.value,)
            lines[k] = key.start_mark.line + 1
            _yaml_lines(value, k, lines)
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            lines[prefix + (i,)] = item.start_mark.line + 1
            _yaml_lines(item, prefix + (i,), lines)


def _load_toml(path: Path, text: str) -> tuple[Any, dict]:
    try:
        import tomllib
    except ImportError:  # Python 3.10
        import tomli as tomllib
    try:
        data = tomllib.loads(text).get("tool", {}).get("graphtool", {})
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML: {exc}") from None
    # TOML parsers give no positions: find each key's first line after [tool.graphtool]
    lines: dict[tuple, int] = {}
    start = next((i for i, ln in enumerate(text.splitlines()) if ln.strip().startswith("[tool.graphtool")), 0)
    for i, ln in enumerate(text.splitlines()[start:], start + 1):
        m = re.match(r"\s*([A-Za-z_][\w-]*)\s*=", ln)
        if m:
            lines.setdefault((m.group(1),), i)
    return data, lines


def _validate(path: Path, data: Any, lines: dict) -> Config:
    def fail(key: tuple, msg: str):
        line = lines.get(key) or lines.get(key[:1])
        where = f"{path}:{line}" if line else str(path)
        name = ".".join(str(k) for k in key) if key else "(top level)"
        raise ConfigError(f"{where}: {name}: {msg}")

    if not isinstance(data, dict):
        fail((), "the config must be a mapping of keys to values")
    _check_keys(data, TOP_KEYS, (), fail)
    root = path.parent
    models = []
    for i, m in enumerate(data.get("models") or []):
        key = ("models", i)
        if isinstance(m, str):
            m = {"path": m}
        if not isinstance(m, dict):
            fail(key, f"each model must be a path or a mapping, got {type(m).__name__}")
        _check_keys(m, MODEL_KEYS, key, fail)
        if "path" not in m:
            fail(key, "a model needs a 'path'")
        model_path = (root / m["path"]).resolve()
        if not model_path.is_file():
            fail(key + ("path",), f"no such file: {m['path']}")
        allowed = tuple(m.get("allowed_breaks", data.get("allowed_breaks", [])))
        for j, pattern in enumerate(allowed):
            try:
                re.compile(pattern)
            except (re.error, TypeError) as exc:
                fail(key + ("allowed_breaks", j), f"not a valid regex: {exc}")
        models.append(ModelEntry(
            path=model_path,
            entry=m.get("entry"),
            max_graph_breaks=m.get("max_graph_breaks", data.get("max_graph_breaks")),
            max_recompiles=m.get("max_recompiles", data.get("max_recompiles")),
            dynamic=bool(m.get("dynamic", data.get("dynamic", False))),
            allowed_breaks=allowed,
            max_skipped_frames=m.get("max_skipped_frames", data.get("max_skipped_frames")),
        ))
    baseline = data.get("baseline")
    return Config(
        file=path,
        models=tuple(models),
        baseline=(root / baseline) if baseline else None,
        jobs=data.get("jobs"),
        timeout=data.get("timeout"),
    )


def _check_keys(data: dict, allowed: dict, prefix: tuple, fail) -> None:
    for key, value in data.items():
        if key not in allowed:
            fail(prefix + (key,), f"unknown key (allowed: {', '.join(sorted(allowed))})")
        want = allowed[key]
        if want is int and isinstance(value, bool) or not isinstance(value, want):
            names = want.__name__ if isinstance(want, type) else " or ".join(t.__name__ for t in want)
            fail(prefix + (key,), f"must be {names}, got {type(value).__name__}")
        if want is int and value < 0:
            fail(prefix + (key,), "must not be negative")
