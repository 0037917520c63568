"""The project config: ``graphtool.yaml`` in the project root, or ``[tool.graphtool]`` in pyproject.toml.

    max_graph_breaks: 0          # defaults for every model
    max_recompiles: 1
    min_coverage: 0.9            # lint: the share of torch calls inside compiled graphs (--min-coverage)
    max_compile_seconds: 120     # lint: the cold compile (graphtool compile) must take no longer
    baseline: graphtool-baseline.json
    models:
      - path: examples/mlp.py
      - path: models/llama.py
        entry: build
        max_graph_breaks: 2
        dynamic: true
        allowed_breaks: ["print", "Tensor\\\\.item"]
        allow_mutations: [buffers, "*.k_cache"]   # what `mutations --check` accepts

Read with yaml safe loading and validated: an unknown key, a wrong type or a missing file is a
:class:`ConfigError` naming the file, the key and the line (exit 2). Numbers are checked too: budgets
0 or more, ``jobs`` 1 or more, ``timeout`` and ``max_compile_seconds`` seconds above 0 (not NaN), ``min_coverage``
a share from 0 to 1. A file that is not UTF-8, nests
deeper than :data:`MAX_DEPTH` or expands (YAML anchors and aliases) to more than :data:`MAX_NODES`
values is refused the same way, before it can cost memory. Paths are relative to the config
file's folder.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from graphtool.errors import ConfigError

MODEL_KEYS = {
    "path": str, "entry": str, "max_graph_breaks": int, "max_recompiles": int, "max_skipped_frames": int, "dynamic": bool,
    "allowed_breaks": list, "allow_mutations": list, "max_peak_memory": str, "min_coverage": (int, float),
    "max_compile_seconds": (int, float),
}
TOP_KEYS = {
    "models": list, "max_graph_breaks": int, "max_recompiles": int, "max_skipped_frames": int, "dynamic": bool,
    "allowed_breaks": list, "allow_mutations": list, "max_peak_memory": str, "min_coverage": (int, float),
    "max_compile_seconds": (int, float), "baseline": str, "jobs": int, "timeout": (int, float),
}
#: the budgets a model takes from its own entry, else from the top of the config (lint's ``Budget`` of the same names)
BUDGET_KEYS = ("max_graph_breaks", "max_recompiles", "max_skipped_frames", "max_peak_memory", "min_coverage",
               "max_compile_seconds")


@dataclass(frozen=True)
class ModelEntry:
    path: Path
    entry: str | None
    max_graph_breaks: int | None
    max_recompiles: int | None
    dynamic: bool
    allowed_breaks: tuple[str, ...]
    max_skipped_frames: int | None = None
    allow_mutations: tuple[str, ...] = ()  # what `mutations --check` accepts: kinds or FQN patterns
    max_peak_memory: str | None = None  # the training step's predicted peak must fit this size or GPU (lint)
    min_coverage: float | None = None  # the share of torch calls that must run inside compiled graphs (lint)
    max_compile_seconds: float | None = None  # the cold compile's seconds (lint, graphtool compile)


@dataclass(frozen=True)
class Config:
    file: Path
    models: tuple[ModelEntry, ...]
    baseline: Path | None
    jobs: int | None
    timeout: float | None
    allow_mutations: tuple[str, ...] = ()  # the default for models that do not set their own

    def allowed_mutations(self, path: str | Path) -> tuple[str, ...]:
        """What ``mutations --check`` accepts for the model at ``path``: its own ``allow_mutations``,
        else the config's, also for a model the config does not list."""
        try:
            target = Path(path).resolve()
        except (OSError, ValueError):
            return self.allow_mutations
        own = next((m for m in self.models if m.path == target), None)
        return own.allow_mutations if own is not None else self.allow_mutations


def find_config(start: Path | None = None) -> Path | None:
    """``graphtool.yaml`` (or ``.yml``) in ``start``, else a pyproject.toml with [tool.graphtool].

    A pyproject.toml that cannot be read as text counts only when its bytes name [tool.graphtool]
    (then :func:`load_config` says what is wrong with it); otherwise it is not graphtool's business."""
    folder = Path(start or Path.cwd())
    for name in ("graphtool.yaml", "graphtool.yml"):
        if (folder / name).is_file():
            return folder / name
    pyproject = folder / "pyproject.toml"
    if pyproject.is_file():
        try:
            raw = pyproject.read_bytes()
        except OSError:
            return None
        if re.search(rb"^\s*\[\s*tool\s*\.\s*graphtool", raw, re.M):
            return pyproject
    return None


#: the most YAML nodes a config may expand to through its aliases (a real config has a few hundred)
MAX_NODES = 100_000
#: the deepest nesting a config may have
MAX_DEPTH = 64


def read_utf8(path: Path, error=ConfigError, *, what: str = "it", hint: str = "save the file as UTF-8") -> str:
    """The text of a file graphtool reads (a config, a baseline), or ``error`` naming the file and, for
    bytes that are not UTF-8, the line they are on. A UTF-8 byte-order mark is dropped."""
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise error(f"{path}: cannot read {what}: {exc.strerror or exc}") from None
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise error(f"{path}:{line}: not UTF-8 text (byte 0x{raw[exc.start]:02x})", hint=hint) from None


def load_config(path: Path) -> Config:
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"{path}: no such config file" if not path.exists() else f"{path}: not a regular file")
    text = read_utf8(path)
    if path.suffix == ".toml":
        data, lines = _load_toml(path, text)
    else:
        data, lines = _load_yaml(path, text)
    return _validate(path, data, lines)


def _load_yaml(path: Path, text: str) -> tuple[Any, dict]:
    """Safe YAML, with aliases that cannot explode: the document is composed (aliases share their
    node), its size counted as if every alias were expanded, and refused above :data:`MAX_NODES` or
    :data:`MAX_DEPTH`, before any Python value is built."""
    import yaml

    # the pure-Python loader: deep nesting ends in a RecursionError, where libyaml's C composer overflows the stack
    loader = yaml.SafeLoader(text)
    try:
        try:
            node = loader.get_single_node()
            if node is not None:
                _check_size(path, node)
            data = loader.construct_document(node) if node is not None else None
        finally:
            loader.dispose()
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = f":{mark.line + 1}" if mark else ""
        raise ConfigError(f"{path}{line}: not valid YAML: {getattr(exc, 'problem', None) or exc}") from None
    except RecursionError:
        raise ConfigError(f"{path}: nested too deeply (more than {MAX_DEPTH} levels)") from None
    lines: dict[tuple, int] = {}
    _yaml_lines(node, (), lines)
    return data if data is not None else {}, lines


def _check_size(path: Path, root) -> None:
    """Count the nodes of ``root`` with every alias expanded (memoized per node: no blow-up here)."""
    import yaml

    sizes: dict[int, int] = {}
    stack = [(root, 1, False)]
    open_nodes: set[int] = set()
    while stack:
        node, depth, done = stack.pop()
        if depth > MAX_DEPTH:
            raise ConfigError(f"{path}:{node.start_mark.line + 1}: nested too deeply (more than {MAX_DEPTH} levels)")
        if isinstance(node, yaml.MappingNode):
            children = [n for pair in node.value for n in pair]
        elif isinstance(node, yaml.SequenceNode):
            children = list(node.value)
        else:
            sizes[id(node)] = 1
            continue
        if done:
            open_nodes.discard(id(node))
            sizes[id(node)] = 1 + sum(sizes[id(c)] for c in children)
            if sizes[id(node)] > MAX_NODES:
                raise ConfigError(
                    f"{path}:{node.start_mark.line + 1}: too large once its aliases are expanded "
                    f"(over {MAX_NODES} values): refusing to load it", hint="write the config without anchors and aliases")
            continue
        if id(node) in sizes:
            continue
        if id(node) in open_nodes:
            raise ConfigError(f"{path}:{node.start_mark.line + 1}: an alias refers to a value that contains it")
        open_nodes.add(id(node))
        stack.append((node, depth, True))
        stack.extend((c, depth + 1, False) for c in children if id(c) not in sizes)


def _yaml_lines(node, prefix: tuple, lines: dict, depth: int = 0) -> None:
    import yaml

    if depth > MAX_DEPTH:
        return
    if isinstance(node, yaml.MappingNode):
        for key, value in node.value:
            k = prefix + (key.value if isinstance(key, yaml.ScalarNode) else "?",)
            lines.setdefault(k, key.start_mark.line + 1)
            _yaml_lines(value, k, lines, depth + 1)
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            lines.setdefault(prefix + (i,), item.start_mark.line + 1)
            _yaml_lines(item, prefix + (i,), lines, depth + 1)


def _load_toml(path: Path, text: str) -> tuple[Any, dict]:
    try:
        import tomllib
    except ImportError:  # Python 3.10
        import tomli as tomllib
    try:
        data = tomllib.loads(text).get("tool", {}).get("graphtool", {})
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML: {exc}") from None
    except RecursionError:
        raise ConfigError(f"{path}: nested too deeply") from None
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
        try:
            model_path = (root / m["path"]).resolve()
            found = model_path.is_file()
        except (OSError, ValueError):  # a NUL byte, a name too long
            found = False
        if not found:
            fail(key + ("path",), f"no such file: {m['path']}")
        allowed = tuple(m.get("allowed_breaks", data.get("allowed_breaks", [])))
        for j, pattern in enumerate(allowed):
            try:
                re.compile(pattern)
            except (re.error, TypeError) as exc:
                fail(key + ("allowed_breaks", j), f"not a valid regex: {exc}")
        allow_mutations = _allow_mutations(m.get("allow_mutations", data.get("allow_mutations", [])),
                                           key if "allow_mutations" in m else (), fail)
        models.append(ModelEntry(
            path=model_path,
            entry=m.get("entry"),
            dynamic=bool(m.get("dynamic", data.get("dynamic", False))),
            allowed_breaks=allowed,
            allow_mutations=allow_mutations,
            **{k: m.get(k, data.get(k)) for k in BUDGET_KEYS},
        ))
    baseline = data.get("baseline")
    return Config(
        file=path,
        models=tuple(models),
        baseline=(root / baseline) if baseline else None,
        jobs=data.get("jobs"),
        timeout=data.get("timeout"),
        allow_mutations=_allow_mutations(data.get("allow_mutations", []), (), fail),
    )


#: the kinds ``allow_mutations`` (and ``mutations --allow``) name; anything else is an FQN pattern
MUTATION_KINDS = ("buffers", "parameters", "user_inputs", "inputs", "optimizer_state")
_KIND_TYPOS = {"buffer": "buffers", "parameter": "parameters", "params": "parameters", "user_input": "user_inputs",
               "input": "inputs"}


def _allow_mutations(values: list, prefix: tuple, fail) -> tuple[str, ...]:
    """Each entry a kind or an FQN pattern (fnmatch); a kind misspelled is an error, not a pattern that matches nothing."""
    key = prefix + ("allow_mutations",)
    for j, v in enumerate(values):
        if not isinstance(v, str) or not v.strip():
            fail(key + (j,), f"must be a kind ({', '.join(MUTATION_KINDS)}) or an FQN pattern such as '*.k_cache', got {v!r}")
        if v in _KIND_TYPOS:
            fail(key + (j,), f"{v!r} is not a kind: did you mean {_KIND_TYPOS[v]!r}? (kinds: {', '.join(MUTATION_KINDS)})")
    return tuple(values)


def _check_keys(data: dict, allowed: dict, prefix: tuple, fail) -> None:
    for key, value in data.items():
        if key not in allowed:
            fail(prefix + (key,), f"unknown key (allowed: {', '.join(sorted(allowed))})")
        want = allowed[key]
        numeric = want is int or isinstance(want, tuple) and int in want
        if numeric and isinstance(value, bool) or not isinstance(value, want):
            names = want.__name__ if isinstance(want, type) else " or ".join(t.__name__ for t in want)
            fail(prefix + (key,), f"must be {names}, got {type(value).__name__}")
        if not numeric:
            continue
        if key in ("timeout", "max_compile_seconds"):  # seconds: a real number above 0 (TOML and YAML spell nan, inf)
            if not (math.isfinite(value) and value > 0):
                fail(prefix + (key,), f"must be a number of seconds greater than 0, got {value}")
        elif key == "min_coverage":
            if not (math.isfinite(value) and 0 <= value <= 1):
                fail(prefix + (key,), f"must be a share from 0 to 1 (0.9 for 90%), got {value}")
        elif value < 0:
            fail(prefix + (key,), "must not be negative")
        elif key == "jobs" and value < 1:
            fail(prefix + (key,), f"must be 1 or more, got {value}")
