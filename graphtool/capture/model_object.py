"""A model handed to graphtool as an object (``graphtool.trace(model, x)``), not as a script to import.

A script can be imported again for every trace; an object cannot. :class:`ModelObject` stands for
the import: each :meth:`~ModelObject.load` gives the same :class:`ModelSpec` with the model's state put
back as the caller handed it, and leaving the ``with`` block puts it back for good:

- every tensor the model and its inputs reach (buffers such as BatchNorm's running statistics, input
  tensors a model mutates in place, cache tensors held in plain attributes), except parameters, is
  copied first and written back; an input whose shape or storage the model changed (``t_()``,
  ``set_()``) gets its old view back;
- parameters' ``.grad`` (and those of input leaves that require grad) are set aside (a training trace
  runs backward, which would add into them in place) and put back; parameters themselves are not
  copied: a trace runs the forward and backward but never an optimizer step; an input with autograd
  history (``h = x * 2``) is traced as a leaf on the same data, so the backward stops there;
- only tensors whose values changed are written back (a write bumps the version counter a backward
  the caller still holds would check);
- each module's ``training`` flag, the grad mode and torch's CPU (and, when initialised, CUDA) random
  number generator states;
- a training step that runs its own optimizer (:mod:`graphtool.capture.train_step`): the parameters of
  every optimizer it reaches, and each optimizer's state and ``param_groups`` (its ``state_dict``).

What is not put back: plain Python values the forward changes (a step counter, a cache object that
appends to a list; an LR scheduler's own count of steps), and ``torch._dynamo``'s caches: every trace calls ``torch._dynamo.reset()`` so
that torch compiles the model afresh and graphtool sees every region; functions the caller compiled
with ``torch.compile`` before recompile on their next call.

The stand-in trace (devices, CUDA graphs, pictures) runs on a copy moved to meta
(:func:`~graphtool.capture.standin.meta.copy_to_meta`), never on the caller's model.

Example::

    >>> import torch
    >>> bn = torch.nn.BatchNorm1d(2)
    >>> with ModelObject(bn, (torch.randn(4, 2),)) as obj:
    ...     _ = obj.load().model(*obj.spec.args)          # updates the running mean
    >>> bn.running_mean
    tensor([0., 0.])
"""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import Any

from graphtool.capture.train_step import optimizer_of_step, optimizer_states, put_back_optimizer
from graphtool.capture.user.script import ModelSpec, _build_spec


def object_spec(model: Any, args: tuple, kwargs: dict | None = None) -> ModelSpec:
    """The :class:`ModelSpec` of a model object: ``path`` and ``line`` are where its class (or function)
    is defined, ``entry`` its name; it is ``borrowed``: never moved, only copied."""
    import torch

    if isinstance(args, torch.Tensor):
        args = (args,)
    defined = model if inspect.isfunction(model) or inspect.ismethod(model) or isinstance(model, type) else type(model)
    name = getattr(defined, "__qualname__", None) or type(model).__name__
    try:
        path = Path(inspect.getsourcefile(defined) or "<model>")
        line = _def_line(defined, path)
    except (OSError, TypeError):  # a builtin, or a class typed into a notebook (its module is __main__)
        path, line = _code_place(defined)
    where = f"{path}:{line}" if line else str(path)
    spec = _build_spec(path, name, model, tuple(args), dict(kwargs or {}), line, where)
    spec.borrowed = True
    return spec


def _def_line(defined: Any, path: Path) -> int | None:
    """The line of ``class Name`` (or the function's ``def``), read without parsing the file:
    ``inspect.getsourcelines`` runs ``ast.parse`` over it, which CPython 3.11.7 was seen to fail
    ("AST constructor recursion depth mismatch") after torch's inductor had raised the recursion limit."""
    import linecache
    import re

    if not isinstance(defined, type):
        code = getattr(defined, "__code__", None)
        return code.co_firstlineno if code is not None else None
    first = getattr(defined, "__firstlineno__", None)  # Python 3.13+
    if first:
        return first
    pattern = re.compile(rf"\s*class\s+{re.escape(defined.__name__)}\b")
    for number, text in enumerate(linecache.getlines(str(path)), start=1):
        if pattern.match(text):
            return number
    return None


def _code_place(defined: Any) -> tuple[Path, int | None]:
    """Where the model's own code is when its class has no source file: its ``forward`` (or the
    function itself), a notebook cell's file (``/tmp/ipykernel_.../123.py``) included."""
    fn = (getattr(defined, "forward", None) or vars(defined).get("__call__")) if isinstance(defined, type) else defined
    code = getattr(fn, "__code__", None)
    if code is None:
        return Path("<model>"), None
    return Path(code.co_filename), code.co_firstlineno


class ModelObject:
    """The caller's model and example inputs, loaded as often as a command asks, state kept; see the module."""

    def __init__(self, model: Any, args: tuple = (), kwargs: dict | None = None):
        self.spec = object_spec(model, _cut_history(tuple(args)), _cut_history(dict(kwargs or {})))
        self._state: _State | None = None
        self._loads = 0

    def __enter__(self) -> ModelObject:
        self._state = _State(self.spec)
        return self

    def __exit__(self, *exc) -> None:
        if self._state is not None:
            self._state.restore(final=True)
            self._state = None

    def load(self) -> ModelSpec:
        """The spec, its model and inputs as the caller handed them (restored after an earlier trace)."""
        if self._state is None:
            raise RuntimeError("ModelObject.load() outside its with block")
        if self._loads:
            self._state.restore(final=False)
        self._loads += 1
        return self.spec


class _State:
    """What a trace may change in the caller's model and inputs, taken before and put back after."""

    def __init__(self, spec: ModelSpec):
        import torch

        from graphtool.capture.standin.meta import reachable_tensors

        self.torch = torch
        model = spec.model
        modules = list(model.modules()) if isinstance(model, torch.nn.Module) else []
        self.training = [(m, m.training) for m in modules]
        self.grad_enabled = torch.is_grad_enabled()
        params = list(model.parameters()) if isinstance(model, torch.nn.Module) else []
        self.params = {id(p): p for p in params}
        found = reachable_tensors((model, spec.args, spec.kwargs))
        # every leaf the trace's backward reaches (parameters, inputs that require grad) keeps its .grad
        leaves = {**self.params, **{i: t for i, t in found.items() if t.is_leaf and t.requires_grad}}
        self.grads = [(t, t.grad) for t in leaves.values()]
        # an optimizer's step as the model (``model = opt.step``) reads the gradients as its inputs: kept
        self.keep_grads = optimizer_of_step(model) is not None
        for t in leaves.values():
            if not self.keep_grads:
                t.grad = None
        self.tensors = []
        for t in found.values():
            if id(t) in self.params or t.device.type == "meta" or _is_param(t):
                continue
            try:
                kept = t.detach().clone()
            except Exception:  # a tensor that cannot be copied (a subclass without clone): left alone
                continue
            self.tensors.append((t, kept, _view_of(t), t.untyped_storage()))
        self.optimizers = optimizer_states(model)
        self.cpu_rng = torch.random.get_rng_state()
        self.cuda_rng = torch.cuda.get_rng_state_all() if torch.cuda.is_available() and torch.cuda.is_initialized() else None

    def restore(self, *, final: bool) -> None:
        torch = self.torch
        with torch.no_grad():
            for t, kept, view, storage in self.tensors:
                if _view_of(t) != view:
                    try:
                        t.set_(storage, view[2], view[0], view[1])
                    except RuntimeError:
                        continue
                # only what changed: a write bumps the tensor's version, which would break a backward
                # the caller still holds through it
                if t.shape == kept.shape and not torch.equal(t, kept):
                    t.copy_(kept)
        for opt, state, params in self.optimizers:
            put_back_optimizer(opt, state)
            with torch.no_grad():
                for p, kept in params:
                    if not torch.equal(p, kept):
                        p.copy_(kept)
        for p, grad in self.grads:
            p.grad = grad if final or self.keep_grads else None
        for m, training in self.training:
            m.training = training
        torch.set_grad_enabled(self.grad_enabled)
        torch.random.set_rng_state(self.cpu_rng)
        if self.cuda_rng is not None:
            torch.cuda.set_rng_state_all(self.cuda_rng)


def _cut_history(value: Any) -> Any:
    """``value`` with each input tensor that has autograd history (``h = x * 2``) replaced by a leaf on
    the same data: the trace's backward then stops at the input, as it would at a script's, and never
    runs through (and frees) the caller's own graph or adds into ``x.grad``."""
    import torch

    if isinstance(value, torch.Tensor):
        return value.detach().requires_grad_() if value.grad_fn is not None else value
    if type(value) in (tuple, list):
        return type(value)(_cut_history(v) for v in value)
    if type(value) is dict:
        return {k: _cut_history(v) for k, v in value.items()}
    return value


def _is_param(t) -> bool:
    import torch

    return isinstance(t, torch.nn.Parameter)


def _view_of(t) -> tuple:
    """``(size, stride, offset, storage key)``: what ``t_()`` or ``set_()`` change."""
    from graphtool.capture import compat

    return (tuple(t.shape), tuple(t.stride()), t.storage_offset(), compat.storage_key(t))
