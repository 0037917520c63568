"""Load a user's model script and find its model and example inputs.

The convention, in order:

1. ``--entry NAME`` (or ``path.py:NAME``): a function returning ``(model, inputs[, kwargs])``;
2. a function ``get_model_and_inputs()`` returning the same;
3. module-level ``model`` and ``example_inputs`` (and optional ``example_kwargs``).

Example::

    >>> spec = load_model("examples/mlp.py")          # doctest: +SKIP
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
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from graphtool.errors import (
    BadModelSpec,
    ModelNotFound,
    ScriptNotFound,
    UserCodeFailed,
)

FACTORY = "get_model_and_inputs"
_GRAPHTOOL_DIR = str(Path(__file__).resolve().parents[1])


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
    with _device_context(device):
        module = import_script(path)
        spec = _find_model(module, path, entry)
        spec.module_name = module.__name__
        return spec


def parse_device(device: str, *, choices: str = "meta, cpu or cuda",
                 no_cuda_hint: str = "use --device meta to build without memory, or run on a GPU machine"):
    """``--device`` as a ``torch.device``; a CUDA device gets its index. Errors name the option:
    not a device (hint: ``choices``), no CUDA present (hint: ``no_cuda_hint``), an index past the count."""
    import torch

    from graphtool.errors import NoCudaDevice, UsageError

    try:
        dev = torch.device(device)
    except (RuntimeError, ValueError):
        raise UsageError(f"--device {device!r} is not a torch device", hint=f"try {choices}") from None
    if dev.type != "cuda":
        return dev
    if not torch.cuda.is_available():
        raise NoCudaDevice(f"--device {device}: no CUDA device is present", hint=no_cuda_hint)
    index = torch.cuda.current_device() if dev.index is None else dev.index
    if index >= torch.cuda.device_count():
        raise UsageError(f"--device {device}: this machine has {torch.cuda.device_count()} CUDA device(s)",
                         hint="count from cuda:0")
    return torch.device("cuda", index)


@contextlib.contextmanager
def _device_context(device: str | None):
    if device is None:
        yield
        return
    with parse_device(device):
        yield


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
        spec.loader.exec_module(module)
    except SystemExit as exc:
        raise UserCodeFailed(f"{path}: the script called sys.exit({exc.code}) while being imported") from None
    except BaseException as exc:  # noqa: BLE001 - any failure of user code is the user's
        if isinstance(exc, KeyboardInterrupt):
            raise
        raise user_code_error(exc, f"importing {path.name} failed") from None
    finally:
        with contextlib.suppress(ValueError):
            sys.path.remove(folder)
    return module


def user_frames(exc: BaseException) -> list[traceback.FrameSummary]:
    """The traceback frames that belong to the user: not graphtool, torch, or the stdlib."""
    frames = traceback.extract_tb(exc.__traceback__)
    return [f for f in frames if _is_user_file(f.filename)]


def user_location_now(skip: int = 0) -> str | None:
    """``file:line`` of the innermost user frame in what graphtool's innermost frame called, if any.

    ``skip``: frames at the top of the stack to ignore (a dispatch-mode handler calling this).
    Frames outside graphtool's call, such as the CLI framework's, are not the user's."""
    stack = traceback.extract_stack()[: -(1 + skip)]
    ours = [i for i, f in enumerate(stack) if f.filename.startswith(_GRAPHTOOL_DIR)]
    called = stack[ours[-1] + 1:] if ours else stack
    frames = [f for f in called if _is_user_file(f.filename)]
    return f"{frames[-1].filename}:{frames[-1].lineno}" if frames else None


def _is_user_file(filename: str) -> bool:
    if filename.startswith("<") or filename.startswith(_GRAPHTOOL_DIR):
        return False
    norm = filename.replace("\\", "/")
    if "/site-packages/torch/" in norm or "/importlib/" in norm or "/lib/python3" in norm and "site-packages" not in norm:
        return False
    return True


def user_code_error(exc: BaseException, what: str) -> UserCodeFailed:
    """Turn an exception raised by user code into a message at the user's innermost line."""
    frames = user_frames(exc)
    where = f"{frames[-1].filename}:{frames[-1].lineno}: " if frames else ""
    detail = "".join(traceback.format_list(frames)) if frames else None
    err = UserCodeFailed(f"{where}{what}: {type(exc).__name__}: {exc}", detail=detail)
    err.full_traceback = full_traceback(exc)
    return err


def full_traceback(exc: BaseException) -> str:
    """Every frame, for ``--debug``."""
    return "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))


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
    try:
        result = factory()
    except BaseException as exc:  # noqa: BLE001
        if isinstance(exc, KeyboardInterrupt):
            raise
        raise user_code_error(exc, f"{name}() raised") from None
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


def iter_tensors(obj: Any, _depth: int = 0):
    """Every tensor in nested tuples, lists, dicts and dataclass-like outputs, in order."""
    import torch

    if isinstance(obj, torch.Tensor):
        yield obj
    elif _depth > 20:
        return
    elif isinstance(obj, dict):
        for v in obj.values():
            yield from iter_tensors(v, _depth + 1)
    elif isinstance(obj, (list, tuple)):
        for v in obj:
            yield from iter_tensors(v, _depth + 1)
    elif hasattr(obj, "to_tuple"):  # transformers' ModelOutput
        yield from iter_tensors(obj.to_tuple(), _depth + 1)


def named_tensors(obj: Any, prefix: str, _depth: int = 0):
    """``(path, tensor)`` for every tensor in ``obj``: ``x``, ``inputs[0]``, ``mask['a']``."""
    import torch

    if isinstance(obj, torch.Tensor):
        yield prefix, obj
    elif _depth > 20:
        return
    elif isinstance(obj, dict):
        for k, v in obj.items():
            yield from named_tensors(v, f"{prefix}[{k!r}]", _depth + 1)
    elif isinstance(obj, (list, tuple)):
        for i, v in enumerate(obj):
            yield from named_tensors(v, f"{prefix}[{i}]", _depth + 1)


def positional_names(spec: ModelSpec) -> list[str]:
    """The forward's name for each positional example input (``args[i]`` past the signature)."""
    fn = spec.model.forward if hasattr(spec.model, "forward") else spec.model
    try:
        params = [
            p.name for p in inspect.signature(fn).parameters.values()
            if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
        ]
    except (TypeError, ValueError):
        params = []
    return [params[i] if i < len(params) else f"args[{i}]" for i in range(len(spec.args))]


def all_named_inputs(spec: ModelSpec) -> list[tuple[str, Any]]:
    """``(name, tensor)`` for every tensor in the example inputs, a tensor passed twice twice."""
    named = []
    for label, arg in zip(positional_names(spec), spec.args):
        named.extend(named_tensors(arg, label))
    for key, value in spec.kwargs.items():
        named.extend(named_tensors(value, key))
    return named


def argument_names(spec: ModelSpec) -> dict[int, str]:
    """id(tensor) -> the forward's argument name (``x``, ``inputs[1]``), first name wins."""
    names: dict[int, str] = {}
    for name, t in all_named_inputs(spec):
        names.setdefault(id(t), name)
    return names


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


def map_tensors(obj: Any, fn, _depth: int = 0) -> Any:
    """Rebuild nested tuples, lists and dicts with ``fn`` applied to every tensor.

    >>> map_tensors((1, [2], {"a": 3}), lambda t: t)   # no tensors: the same structure back
    (1, [2], {'a': 3})
    """
    import torch

    if isinstance(obj, torch.Tensor):
        return fn(obj)
    if _depth > 20:
        return obj
    if isinstance(obj, tuple):
        return tuple(map_tensors(o, fn, _depth + 1) for o in obj)
    if isinstance(obj, list):
        return [map_tensors(o, fn, _depth + 1) for o in obj]
    if isinstance(obj, dict):
        return {k: map_tensors(v, fn, _depth + 1) for k, v in obj.items()}
    return obj
