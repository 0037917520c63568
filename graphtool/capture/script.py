"""Import a user's model script and find its model and example inputs.

The convention, in order:

1. ``--entry NAME`` (or ``path.py:NAME``): a function returning ``(model, inputs[, kwargs])``;
2. a function ``get_model_and_inputs()`` returning the same;
3. module-level ``model`` and ``example_inputs`` (and optional ``example_kwargs``).

Example::

    >>> spec = load_model("examples/mlp.py")
    >>> spec.entry, len(spec.args)
    ('get_model_and_inputs', 1)

The script is imported with ``__name__`` set to ``graphtool_user_<stem>`` (never ``"__main__"``),
its folder first on ``sys.path``. Every mistake in it becomes a :class:`UserScriptError` whose
message names the file and line, with a traceback cut to the user's own frames.
"""

from __future__ import annotations

import ast
import contextlib
import importlib.util
import inspect
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from graphtool.capture.devices import device_context
from graphtool.capture.tensors import iter_tensors
from graphtool.capture.user_code import running_user_code
from graphtool.errors import BadModelSpec, ModelNotFound, ScriptNotFound, UserCodeFailed

FACTORY = "get_model_and_inputs"


@dataclass
class ModelSpec:
    """What a script provides: the callable, its example inputs and where they came from."""

    path: Path
    entry: str
    model: Any
    args: tuple
    kwargs: dict = field(default_factory=dict)
    line: int | None = None
    module_name: str | None = None

    @property
    def location(self) -> str:
        return f"{self.path}:{self.line}" if self.line else str(self.path)


def split_target(target: str) -> tuple[str, str | None]:
    """``"model.py:build"`` -> ``("model.py", "build")``; a bare path keeps entry None."""
    head, sep, tail = target.rpartition(":")
    if sep and tail.isidentifier() and head and not os.path.exists(target):
        return head, tail
    return target, None


def load_model(target: str | os.PathLike, entry: str | None = None, device: str | None = None) -> ModelSpec:
    """Import ``target`` and return its :class:`ModelSpec`; ``device="meta"`` builds it on meta."""
    path_str, inline_entry = split_target(os.fspath(target))
    entry = entry or inline_entry
    path = Path(path_str)
    if not path.exists():
        raise ScriptNotFound(f"{path}: no such file", hint="pass the path to a Python model script")
    if path.is_dir():
        raise ScriptNotFound(f"{path}: is a folder, not a Python script")
    path = path.resolve()
    with device_context(device):
        module = import_script(path)
        spec = _find_model(module, path, entry)
        spec.module_name = module.__name__
        return spec


def import_script(path: Path):
    """Import the script as a module; errors name the file and line."""
    try:
        source = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ScriptNotFound(f"{path}: cannot read it ({exc})") from exc
    try:
        compile(source, str(path), "exec")
    except SyntaxError as exc:
        line = f":{exc.lineno}" if exc.lineno else ""
        text = (exc.text or "").rstrip()
        raise UserCodeFailed(
            f"{path}{line}: syntax error: {exc.msg}",
            detail=f"    {text.strip()}" if text else None,
        ) from None
    name = "graphtool_user_" + "".join(c if c.isalnum() else "_" for c in path.stem)
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    folder = str(path.parent)
    sys.path.insert(0, folder)
    sys.modules[name] = module
    try:
        with running_user_code(f"importing {path.name} failed", where=str(path)):
            spec.loader.exec_module(module)
    finally:
        with contextlib.suppress(ValueError):
            sys.path.remove(folder)
    return module


def _find_model(module: Any, path: Path, entry: str | None) -> ModelSpec:
    names = [n for n in vars(module) if not n.startswith("_")]
    if entry is not None:
        if not hasattr(module, entry):
            raise ModelNotFound(
                f"{path}: no function named {entry!r}",
                hint=f"the script defines: {', '.join(sorted(names)) or 'nothing'}",
            )
        return _call_factory(getattr(module, entry), path, entry)
    if hasattr(module, FACTORY):
        return _call_factory(getattr(module, FACTORY), path, FACTORY)
    if hasattr(module, "model") and hasattr(module, "example_inputs"):
        kwargs = getattr(module, "example_kwargs", None) or {}
        line = _assignment_line(path, "example_inputs")
        return _build_spec(path, "model", module.model, module.example_inputs, kwargs, line, path)
    missing = [n for n in ("model", "example_inputs") if not hasattr(module, n)]
    raise ModelNotFound(
        f"{path}: no model found: looked for a function {FACTORY}(), or module-level "
        f"'model' and 'example_inputs' (missing: {', '.join(missing)})",
        hint=f"the script defines: {', '.join(sorted(names)) or 'nothing'}; "
        "pass --entry NAME to use another factory function",
    )


def _call_factory(factory: Any, path: Path, name: str) -> ModelSpec:
    line = _def_line(factory)
    where = f"{path}:{line}" if line else str(path)
    if not callable(factory):
        raise BadModelSpec(f"{where}: {name} is a {type(factory).__name__}, not a function")
    with running_user_code(f"{name}() raised", where=where):
        result = factory()
    if not isinstance(result, tuple) or len(result) not in (2, 3):
        got = f"a tuple of {len(result)}" if isinstance(result, tuple) else type(result).__name__
        raise BadModelSpec(
            f"{where}: {name}() must return (model, example_inputs) or "
            f"(model, example_inputs, example_kwargs), got {got}"
        )
    model, inputs = result[0], result[1]
    kwargs = result[2] if len(result) == 3 else {}
    return _build_spec(path, name, model, inputs, kwargs, line, where)


def _build_spec(path: Path, entry: str, model: Any, inputs: Any, kwargs: Any, line, where) -> ModelSpec:
    import torch

    if not callable(model):
        raise BadModelSpec(f"{where}: the model is a {type(model).__name__}, not an nn.Module or callable")
    if isinstance(inputs, torch.Tensor):
        inputs = (inputs,)
    elif isinstance(inputs, list):
        inputs = tuple(inputs)
    if not isinstance(inputs, tuple):
        raise BadModelSpec(
            f"{where}: example_inputs must be a tuple of positional arguments or a tensor, "
            f"got {type(inputs).__name__}"
        )
    if kwargs is None:
        kwargs = {}
    if not isinstance(kwargs, dict) or not all(isinstance(k, str) for k in kwargs):
        raise BadModelSpec(f"{where}: example_kwargs must be a dict of str -> value, got {type(kwargs).__name__}")
    if not any(isinstance(t, torch.Tensor) for t in iter_tensors((inputs, kwargs))):
        raise BadModelSpec(f"{where}: the example inputs contain no tensor; graphtool needs at least one")
    return ModelSpec(path=path, entry=entry, model=model, args=inputs, kwargs=dict(kwargs), line=line)


def _def_line(obj: Any) -> int | None:
    try:
        return inspect.getsourcelines(obj)[1]
    except (TypeError, OSError):
        return None


def _assignment_line(path: Path, name: str) -> int | None:
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"))
    except (OSError, SyntaxError):
        return None
    for node in tree.body:
        targets = node.targets if isinstance(node, ast.Assign) else [getattr(node, "target", None)]
        if any(isinstance(t, ast.Name) and t.id == name for t in targets):
            return node.lineno
    return None


