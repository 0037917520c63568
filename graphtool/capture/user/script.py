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
import importlib.machinery
import importlib.util
import inspect
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from graphtool.capture.tensors import iter_tensors
from graphtool.capture.user.boundary import running_user_code, user_code_error
from graphtool.capture.user.devices import device_context
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
    #: the caller's own object (``graphtool.trace(model, x)``), not a script graphtool loaded: a trace
    #: that needs the model elsewhere copies it (:func:`~graphtool.capture.standin.meta.copy_to_meta`), never moves it
    borrowed: bool = False
    #: the optimizer the loop builds, as a script's ``get_optimizer(model)`` (``graphtool.load(..., optimizer=)``)
    optimizer: Any = None

    @property
    def location(self) -> str:
        return f"{self.path}:{self.line}" if self.line else str(self.path)


def split_target(target: str) -> tuple[str, str | None]:
    """``"model.py:build"`` -> ``("model.py", "build")``; a bare path keeps entry None."""
    head, sep, tail = target.rpartition(":")
    if sep and tail.isidentifier() and head and not os.path.exists(target):
        return head, tail
    return target, None


def check_script_path(target: str | os.PathLike) -> Path:
    """The script's path, checked before anything is imported (torch included): it exists, is a
    readable file and is named ``*.py``. Raises :class:`ScriptNotFound` otherwise.

    >>> check_script_path("no/such/model.py")
    Traceback (most recent call last):
    graphtool.errors.ScriptNotFound: no/such/model.py: no such file
    """
    path_str, _ = split_target(os.fspath(target))
    path = Path(path_str)
    if not path.exists():
        near = Path(path_str + ".py")
        hint = f"did you mean {near}?" if path.suffix != ".py" and near.is_file() else "pass the path to a Python model script"
        raise ScriptNotFound(f"{path}: no such file", hint=hint)
    if path.is_dir():
        raise ScriptNotFound(f"{path}: is a folder, not a Python script")
    if path.suffix != ".py":
        raise ScriptNotFound(f"{path}: not a Python script (the name does not end in .py)",
                             hint="pass the model's .py file (graphtool imports it as a module)")
    if not os.access(path, os.R_OK):
        raise ScriptNotFound(f"{path}: cannot read it (permission denied)")
    return path


def load_model(target: str | os.PathLike, entry: str | None = None, device: str | None = None,
               factory_args: tuple = (), module: Any = None) -> ModelSpec:
    """Import ``target`` and return its :class:`ModelSpec`; ``device="meta"`` builds it on meta.
    ``factory_args`` go to the factory (``get_distributed_model(world_size)`` under ``--ddp``).
    ``module``: the script as already imported (the spec's ``module_name`` in ``sys.modules``): only
    the factory is called, the script is not run again (:mod:`graphtool.capture.load_once`).

    The script runs with ``sys.argv`` set to ``[script]`` (its own argument parsing sees no graphtool
    options), and the current folder is restored afterwards should it ``os.chdir()``."""
    path_str, inline_entry = split_target(os.fspath(target))
    entry = entry or inline_entry
    path = check_script_path(path_str).resolve()
    old_argv, cwd = sys.argv, _cwd()
    sys.argv = [str(path)]
    try:
        with device_context(device):
            if module is None:
                module = import_script(path)
            spec = _find_model(module, path, entry, factory_args)
            spec.module_name = module.__name__
            return spec
    finally:
        sys.argv = old_argv
        if cwd is not None and _cwd() != cwd:
            with contextlib.suppress(OSError):
                os.chdir(cwd)


def _cwd() -> str | None:
    try:
        return os.getcwd()
    except OSError:  # the folder was removed
        return None


def import_script(path: Path):
    """Import the script as a module; errors name the file and line.

    Source is read as Python reads it (a UTF-8 BOM, a PEP 263 coding line). A script inside a
    package (``__init__.py`` beside it, and above) is imported as part of that package, as pytest
    does, so its relative imports work: the package root goes on ``sys.path`` and the script gets its
    dotted name (``pkg.model``)."""
    path = Path(path)
    try:
        source = path.read_bytes()
    except OSError as exc:
        raise ScriptNotFound(f"{path}: cannot read it ({exc.strerror or exc})") from None
    try:
        compile(source, str(path), "exec", dont_inherit=True)
    except (SyntaxError, ValueError) as exc:
        raise _syntax_error(path, exc) from None
    except RecursionError:
        raise UserCodeFailed(f"{path}: Python cannot compile it: nested too deeply") from None
    package, root = _package_of(path, source)
    if package is None:
        name = "graphtool_user_" + "".join(c if c.isalnum() else "_" for c in path.stem)
        folders = [str(path.parent)]
    else:
        name = f"{package}.{path.stem}" if path.name != "__init__.py" else package
        folders = [str(path.parent), str(root)]
    spec = importlib.util.spec_from_file_location(
        name, path, loader=importlib.machinery.SourceFileLoader(name, str(path)),
        submodule_search_locations=[str(path.parent)] if path.name == "__init__.py" else None,
    )
    module = importlib.util.module_from_spec(spec)
    for folder in reversed(folders):
        sys.path.insert(0, folder)
    try:
        with running_user_code(f"importing {path.name} failed", where=str(path)):
            if package is not None and name != package:
                _import_package(package, root, path)
            sys.modules[name] = module  # a fresh module every import (a command imports once: capture/load_once.py)
            spec.loader.exec_module(module)
    finally:
        for folder in folders:
            with contextlib.suppress(ValueError):
                sys.path.remove(folder)
    return module


def _syntax_error(path: Path, exc: Exception) -> UserCodeFailed:
    if not isinstance(exc, SyntaxError):  # a NUL byte in the source
        return UserCodeFailed(f"{path}: not Python source: {exc}")
    line = f":{exc.lineno}" if exc.lineno else ""
    text = exc.text or ""
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    text = text.strip().lstrip("\ufeff")
    if len(text) > 200:
        text = text[:200] + "..."
    return UserCodeFailed(f"{path}{line}: syntax error: {exc.msg}", detail=f"    {text}" if text else None)


def _package_of(path: Path, source: bytes | None = None) -> tuple[str | None, Path | None]:
    """``("pkg.sub", root)`` when ``path`` lies in a package (``__init__.py`` in its folder, and so on
    up), ``root`` being the folder that holds the top package; ``(None, None)`` otherwise. A script
    whose relative imports reach above its ``__init__.py`` folders (or that has none) gets namespace
    packages for the folders its imports need, as ``python -m pkg.model`` would.

    >>> _package_of(Path(__file__).resolve())[0]
    'graphtool.capture.user'
    """
    parts: list[str] = []
    folder = path.parent
    while (folder / "__init__.py").is_file() and folder.name.isidentifier() and folder.parent != folder:
        parts.insert(0, folder.name)
        folder = folder.parent
    needed = _relative_level(source) - (len(parts) if path.name != "__init__.py" else len(parts) - 1)
    for _ in range(max(0, needed)):
        if not folder.name.isidentifier() or folder.parent == folder:
            break
        parts.insert(0, folder.name)
        folder = folder.parent
    if not parts or (path.name != "__init__.py" and not path.stem.isidentifier()):
        return None, None
    return ".".join(parts), folder


def _relative_level(source: bytes | None) -> int:
    """How many packages up the script's deepest relative import reaches (``from ..x import y``: 2)."""
    if not source or b"from ." not in source and b"from\t." not in source:
        return 0
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return 0
    return max((n.level for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.level), default=0)


#: top-level packages graphtool imported for a user's script: imported afresh for each load, as a
#: script is (a long-lived process, such as a test run, may load several projects' ``models`` packages)
_USER_PACKAGES: set[str] = set()


def _import_package(package: str, root: Path, path: Path) -> None:
    """Import the script's package (its ``__init__``s run as they would under ``python -m``); a
    package of the same name imported from elsewhere is an error, not a silent mix-up."""
    top = package.split(".")[0]
    if top in _USER_PACKAGES:
        for name in [n for n in sys.modules if n == top or n.startswith(top + ".")]:
            del sys.modules[name]
    elif top in sys.modules:  # imported by someone else (graphtool itself for its bundled example): kept
        _check_home(top, root, path)
    ours = top not in sys.modules
    importlib.invalidate_caches()
    importlib.import_module(package)
    _check_home(top, root, path)
    if ours:
        _USER_PACKAGES.add(top)


def _check_home(top: str, root: Path, path: Path) -> None:
    mod = sys.modules.get(top)
    homes = [Path(p).resolve() for p in getattr(mod, "__path__", None) or ()]
    if (root / top).resolve() not in homes:
        found = ", ".join(str(h) for h in homes) or getattr(mod, "__file__", None) or "elsewhere"
        raise UserCodeFailed(
            f"{path}: its package {top!r} ({root / top}) clashes with the module {top!r} already imported from {found}",
            hint="rename the package, or pass a script outside it",
        )


_MISSING = object()


def _lookup(module: Any, name: str, path: Path) -> Any:
    """``module.name``, or ``_MISSING``. The module's own namespace first; a module-level
    ``__getattr__`` (PEP 562) is user code, and what it raises (other than AttributeError) is the
    user's error at the user's line."""
    namespace = vars(module)
    if name in namespace:
        return namespace[name]
    if "__getattr__" not in namespace:
        return _MISSING
    with running_user_code(f"looking up {name!r} through {path.name}'s module __getattr__ raised", where=str(path)):
        try:
            return getattr(module, name)
        except AttributeError:
            return _MISSING


def _find_model(module: Any, path: Path, entry: str | None, factory_args: tuple = ()) -> ModelSpec:
    names = [n for n in vars(module) if not n.startswith("_")]
    if entry is not None:
        factory = _lookup(module, entry, path)
        if factory is _MISSING:
            raise ModelNotFound(
                f"{path}: no function named {entry!r}",
                hint=f"the script defines: {', '.join(sorted(names)) or 'nothing'}",
            )
        return _call_factory(factory, path, entry, factory_args)
    factory = _lookup(module, FACTORY, path)
    if factory is not _MISSING:
        return _call_factory(factory, path, FACTORY)
    model, inputs = _lookup(module, "model", path), _lookup(module, "example_inputs", path)
    if model is not _MISSING and inputs is not _MISSING:
        kwargs = _lookup(module, "example_kwargs", path)
        kwargs = {} if kwargs is _MISSING or kwargs is None else kwargs
        line = _assignment_line(path, "example_inputs")
        model_line = _assignment_line(path, "model")
        return _build_spec(path, "model", model, inputs, kwargs, line, f"{path}:{line}" if line else str(path),
                           model_where=f"{path}:{model_line}" if model_line else str(path))
    missing = [n for n, v in (("model", model), ("example_inputs", inputs)) if v is _MISSING]
    raise ModelNotFound(
        f"{path}: no model found: looked for a function {FACTORY}(), or module-level "
        f"'model' and 'example_inputs' (missing: {', '.join(missing)})",
        hint=f"the script defines: {', '.join(sorted(names)) or 'nothing'}; "
        "pass --entry NAME to use another factory function",
    )


def _call_factory(factory: Any, path: Path, name: str, args: tuple = ()) -> ModelSpec:
    line = _def_line(factory) or _assignment_line(path, name)
    where = f"{path}:{line}" if line else str(path)
    if not callable(factory):
        raise BadModelSpec(f"{where}: {name} is a {type(factory).__name__}, not a function")
    with running_user_code(f"{name}() raised", where=where):
        result = factory(*args)
    if not isinstance(result, tuple) or len(result) not in (2, 3):
        got = f"a tuple of {len(result)}" if isinstance(result, tuple) else type(result).__name__
        raise BadModelSpec(
            f"{where}: {name}() must return (model, example_inputs) or "
            f"(model, example_inputs, example_kwargs), got {got}"
        )
    model, inputs = result[0], result[1]
    kwargs = result[2] if len(result) == 3 else {}
    return _build_spec(path, name, model, inputs, kwargs, line, where)


#: what graphtool calls on a model that has them, as on an nn.Module
_MODULE_METHODS = ("parameters", "named_parameters", "buffers", "named_buffers")


def _build_spec(path: Path, entry: str, model: Any, inputs: Any, kwargs: Any, line, where, *,
                model_where=None) -> ModelSpec:
    import torch

    model_where = model_where or where
    if isinstance(model, type):
        name = model.__name__
        raise BadModelSpec(f"{model_where}: the model is the class {name}, not an instance of it",
                           hint=f"build one: {name}(...)")
    if not callable(model):
        raise BadModelSpec(f"{model_where}: the model is a {type(model).__name__}, not an nn.Module or callable")
    if is_module(model):
        _check_module_methods(model, model_where, torch)
    if isinstance(inputs, torch.Tensor):
        inputs = (inputs,)
    elif isinstance(inputs, list):
        inputs = tuple(inputs)
    if not isinstance(inputs, tuple):
        hint = "make it a tuple: tuple(...) of the generator's items" if inspect.isgenerator(inputs) else None
        raise BadModelSpec(
            f"{where}: example_inputs must be a tuple of positional arguments or a tensor, "
            f"got {type(inputs).__name__}", hint=hint,
        )
    if kwargs is None:
        kwargs = {}
    if not isinstance(kwargs, dict) or not all(isinstance(k, str) for k in kwargs):
        raise BadModelSpec(f"{where}: example_kwargs must be a dict of str -> value, got {type(kwargs).__name__}")
    if not any(isinstance(t, torch.Tensor) for t in iter_tensors((inputs, kwargs))) and not _optimizer_step(model):
        raise BadModelSpec(f"{where}: the example inputs contain no tensor; graphtool needs at least one")
    return ModelSpec(path=path, entry=entry, model=model, args=inputs, kwargs=dict(kwargs), line=line)


def _optimizer_step(model: Any) -> bool:
    """``model = opt.step``: an optimizer's step takes no inputs (its tensors are the optimizer's own)."""
    from graphtool.capture.train_step import optimizer_of_step

    return optimizer_of_step(model) is not None


def _check_module_methods(model: Any, where: str, torch) -> None:
    """A model's ``parameters`` (and the like), when it has them, must be what an nn.Module's are:
    graphtool calls them. Reading and calling them runs the user's code (a ``__getattr__``, an override)."""
    kind = type(model).__name__
    for attr in _MODULE_METHODS:
        with running_user_code(f"reading the model's .{attr} raised", where=where):
            try:
                value = getattr(model, attr)
            except AttributeError:
                continue
        if not callable(value):
            raise BadModelSpec(
                f"{where}: the model (a {kind}) has .{attr} = a {type(value).__name__}, not a method; "
                f"graphtool calls model.{attr}() as on an nn.Module",
                hint="rename the attribute, or make the model an nn.Module",
            )
        if attr in ("parameters", "buffers"):
            with running_user_code(f"the model's .{attr}() raised", where=where):
                items = list(value())
            if not all(isinstance(t, torch.Tensor) for t in items):
                raise BadModelSpec(f"{where}: the model's .{attr}() must yield tensors, as an nn.Module's does")


def _def_line(obj: Any) -> int | None:
    try:
        return inspect.getsourcelines(obj)[1]
    except (TypeError, OSError):
        return None


def _assignment_line(path: Path, name: str) -> int | None:
    try:
        tree = ast.parse(path.read_bytes())  # bytes: a BOM or a coding line is honoured, as Python does
    except (OSError, SyntaxError, ValueError, RecursionError):
        return None
    for node in tree.body:
        targets = node.targets if isinstance(node, ast.Assign) else [getattr(node, "target", None)]
        if any(isinstance(t, ast.Name) and t.id == name for t in targets):
            return node.lineno
    return None




def model_call_error(spec: ModelSpec, exc: BaseException, what: str = "the model raised on its example inputs") -> UserCodeFailed:
    """The model failed on its example inputs: at the user's innermost line, or, when the failure
    is inside torch (a shape mismatch in ``nn.Linear``), at the line that defines the inputs; see
    :func:`with_call_detail` for what the message adds."""
    return with_call_detail(user_code_error(exc, what, spec.location), spec)


def with_call_detail(err: UserCodeFailed, spec: ModelSpec) -> UserCodeFailed:
    """``err`` with the model's and the inputs' lines, the inputs' shapes, and a hint when the model
    and its inputs are on different devices (a script that builds its model on meta, say)."""
    from graphtool.capture.tensors import iter_tensors, named_tensors

    kind = type(spec.model).__name__
    if spec.entry == "model":
        model_line = _assignment_line(spec.path, "model")
        lines = [f"  model: a {kind}, defined at {spec.path}{f':{model_line}' if model_line else ''}",
                 f"  example_inputs, defined at {spec.location}:"]
    else:
        lines = [f"  model: a {kind}, from {spec.entry}() at {spec.location}", "  example_inputs:"]
    shown = [*named_tensors(tuple(spec.args), ""), *named_tensors(dict(spec.kwargs), "kwargs")]
    for name, t in shown[:8]:
        lines.append(f"    {name}: {str(t.dtype).removeprefix('torch.')}{list(t.shape)} on {t.device}")
    if len(shown) > 8:
        lines.append(f"    ... and {len(shown) - 8} more tensors")
    detail = "\n".join(([err.detail.rstrip()] if err.detail else []) + lines)
    hint = err.hint
    own = {t.device.type for t in _model_tensors(spec.model)}
    given = {t.device.type for t in iter_tensors((spec.args, spec.kwargs))}
    if hint is None and own and given and not own & given:
        hint = (f"the model's parameters are on {', '.join(sorted(own))} and its example inputs on "
                f"{', '.join(sorted(given))}: build both on one device (--device sets only the default device)")
    return UserCodeFailed(err.message, detail=detail, hint=hint, full_traceback=err.full_traceback)


def _model_tensors(model: Any) -> list:
    return [*model.parameters(), *model.buffers()] if is_module(model) else []


def is_module(model: Any) -> bool:
    """Whether graphtool treats ``model`` as an ``nn.Module`` (asks it for parameters, buffers,
    submodules). Decided by its class, never by its attributes: a plain callable may well have a
    ``parameters`` dict.

    >>> class Scale:
    ...     parameters = {"factor": 2.0}
    ...     def __call__(self, x):
    ...         return x * self.parameters["factor"]
    >>> is_module(Scale())
    False
    """
    import torch

    return isinstance(model, torch.nn.Module)
