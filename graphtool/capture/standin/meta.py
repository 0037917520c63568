"""An accelerator stand-in: the model and its inputs moved to the meta device.

This machine (and CI) has no GPU, and faking CUDA on a CPU build of torch can abort the
interpreter. The meta device does the job safely: a trace on meta keeps every op the user's code
puts on the CPU (``.cpu()`` becomes ``_to_copy`` to cpu, ``torch.tensor(2.0)`` a cpu constant),
which a CPU trace cannot show since ``.cpu()`` is a no-op there. Meta then stands for ``cuda:0``.

Every tensor the model reaches moves, not only parameters, buffers and the tensors in the inputs'
tuples, lists and dicts: a real CPU tensor left in a cache object or a module's plain attribute
would meet the trace's fake meta tensors and stop it (see :class:`MetaMover`).
"""

from __future__ import annotations

import enum
import functools
import types
import weakref
from dataclasses import replace
from typing import Any

from graphtool.capture.user.script import ModelSpec


def accelerator_of(spec: ModelSpec) -> str:
    """``cuda`` when the model already lives on a GPU, else ``meta`` (the stand-in)."""
    from graphtool.capture.tensors import iter_tensors
    from graphtool.capture.user.input_names import named_state

    params, buffers = named_state(spec.model)
    tensors = [t for _, t in params + buffers] + list(iter_tensors((spec.args, spec.kwargs)))
    return "cuda" if any(t.device.type == "cuda" for t in tensors) else "meta"


def to_meta(spec: ModelSpec) -> ModelSpec:
    """Move every tensor the model and its example inputs reach to meta; see :class:`MetaMover`.

    The model and the objects it holds change in place (a load of its own; a command that traces the
    model again makes its stand-in with :func:`copy_to_meta` instead, see
    :mod:`graphtool.capture.load_once`); tuples are rebuilt, so the returned spec carries the moved inputs."""
    from graphtool.capture.train_step import optimizers_reached
    from graphtool.capture.user.input_names import reached_places

    mover = MetaMover()
    model = mover.move(spec.model)
    if model is spec.model:  # a plain function: the modules and tensors it reaches through globals and closures
        for _name, obj, put in reached_places(spec.model):
            moved = mover.move(obj)
            if moved is not obj and put is not None:
                put(moved)
    optimizers = [opt for _name, opt in optimizers_reached(spec.model)]
    for opt in optimizers:  # after the modules: its param_groups and state keys become their moved parameters
        mover.move(opt)
    capturable_as_on_a_gpu(optimizers)
    return replace(spec, model=model, args=mover.move(spec.args), kwargs=mover.move(spec.kwargs))


def capturable_as_on_a_gpu(optimizers: list) -> None:
    """``capturable=True`` in each param group whose parameters all moved to meta and have no state yet, as
    dynamo sets it when it traces an optimizer whose parameters are on a GPU (``OptimizerVariable._set_capturable``
    tests ``p.is_cuda``, which a meta parameter is not): the state it then creates (Adam's ``step``) lives on the
    parameters' device, not on the CPU, as on the GPU. Groups with no ``capturable`` option are left alone."""
    for opt in optimizers:
        for group in opt.param_groups:
            params = group.get("params", [])
            if ("capturable" in group and params and all(p.device.type == "meta" for p in params)
                    and all(p not in opt.state for p in params)):
                group["capturable"] = True


#: how far the walk follows attributes and containers from the model or an input
MAX_DEPTH = 12
#: where a module keeps what ``Module.to`` moves itself
_MODULE_REGISTRIES = frozenset({"_parameters", "_buffers", "_modules"})


class MetaMover:
    """Moves every tensor reachable from the values it is given to meta, each tensor once.

    Parameters and buffers move with ``Module.to``; every other tensor is found by walking plain
    attributes (``__dict__`` and slots), dataclasses, lists, tuples and dicts, and is replaced where
    it lives: a module's plain tensor attribute, a cache object's per-layer ``keys`` (transformers'
    ``StaticCache.layers[i].keys``), a list element. Identity is kept: a tensor reached twice (an
    input that is also a parameter, two caches sharing a tensor) becomes the same meta tensor, and a
    view stays a view of its moved base. ``requires_grad`` and the tensor's Python attributes
    (``mark_static_address``'s ``_dynamo_static_input_type``, ``mark_dynamic``'s indices) move along.

    >>> import torch
    >>> class Layer:
    ...     def __init__(self, t):
    ...         self.keys, self.device = t, t.device
    >>> t = torch.zeros(2, 3)
    >>> layers, same = MetaMover().move(([Layer(t)], t))
    >>> layers[0].keys.device, layers[0].device, layers[0].keys is same
    (device(type='meta'), device(type='meta'), True)
    """

    def __init__(self, max_depth: int = MAX_DEPTH, *, collect: bool = False, fresh: bool = False):
        self.max_depth = max_depth
        #: walk only: every tensor the move would reach is found (:meth:`found`), nothing changes
        self.collect = collect
        #: a tensor already on meta gets a new meta tensor too (a copy of a stand-in shares nothing with it)
        self.fresh = fresh
        # id(original) -> (original, its stand-in); holding the original keeps its id from being reused
        self._done: dict[int, tuple[Any, Any]] = {}
        #: id(stand-in) -> the device of the tensor it stands for, for stand-ins a copy already holds
        #: (:func:`copy_to_meta`): an object that records its tensors' device follows them as in a move
        self.origins: dict[int, Any] = {}

    def found(self) -> dict[int, Any]:
        """Every tensor reached so far, by id (what a ``collect`` walk is for)."""
        import torch

        return {key: old for key, (old, _) in self._done.items() if isinstance(old, torch.Tensor)}

    def move(self, obj: Any, depth: int = 0) -> Any:
        """``obj`` with its tensors on meta: a new tensor or tuple, else ``obj`` itself, changed in place."""
        import torch

        if isinstance(obj, torch.Tensor):
            return self._tensor(obj)
        if depth > self.max_depth or _is_leaf(obj):
            return obj
        if id(obj) in self._done:
            return self._done[id(obj)][1]
        if isinstance(obj, torch.nn.Module):
            return self._module(obj, depth)
        if isinstance(obj, tuple):
            return self._tuple(obj, depth)
        self._done[id(obj)] = (obj, obj)  # changed in place: marked first, so a cycle ends here
        if isinstance(obj, list):
            for i, value in enumerate(list(obj)):
                self._replace(value, depth, lambda new, i=i: list.__setitem__(obj, i, new))
        elif isinstance(obj, dict):
            for key, value in list(obj.items()):
                self._replace(value, depth, lambda new, key=key: dict.__setitem__(obj, key, new))
            self._move_keys(obj)
        if isinstance(obj, types.MethodType):  # a bound ``forward``: its module holds the tensors
            self.move(obj.__self__, depth + 1)
        else:
            self._attributes(obj, depth)
        return obj

    def _move_keys(self, obj: dict) -> None:
        """A dict keyed by tensors (an optimizer's ``state``, keyed by its parameters) keyed by their stand-ins,
        in the same order: the optimizer then finds the state of the parameters it now steps."""
        import torch

        if self.collect or not any(isinstance(k, torch.Tensor) for k in obj):
            return
        items = [(self._tensor(k) if isinstance(k, torch.Tensor) else k, v) for k, v in obj.items()]
        dict.clear(obj)
        for k, v in items:
            dict.__setitem__(obj, k, v)

    def _replace(self, value: Any, depth: int, put) -> bool:
        """Move ``value`` and ``put`` the result back where it was, when it changed."""
        new = self.move(value, depth + 1)
        if new is not value:
            put(new)
        return new is not value

    def _attributes(self, obj: Any, depth: int) -> None:
        import torch

        left: set = set()  # the devices this object's own tensors were moved from
        for name, value in _fields(obj):
            changed = self._replace(value, depth, lambda new, name=name: _set_field(obj, name, new))
            if changed and isinstance(value, torch.Tensor):
                left.add(value.device)
            elif isinstance(value, torch.Tensor) and id(value) in self.origins:
                left.add(self.origins[id(value)])
        if left and not isinstance(obj, torch.nn.Module):
            # A cache layer records where its tensors live (``self.device``) and makes new ones there
            # (``torch.arange(n, device=self.device)``): on a GPU that is the GPU, so it follows them.
            for name, value in _fields(obj):
                if isinstance(value, torch.device) and value in left:
                    _set_field(obj, name, torch.device("meta"))

    def _tensor(self, t):
        import torch

        if id(t) in self._done:
            return self._done[id(t)][1]
        if self.collect:
            self._done[id(t)] = (t, t)
            if t.grad is not None:
                self._tensor(t.grad)
            for value in list(vars(t).values()):  # dynamo's marks, and whatever else rides on the tensor
                self.move(value, self.max_depth)
            return t
        if t.device.type == "meta" and not self.fresh:
            moved = t
        elif t._base is not None:  # a view of another tensor: view the moved base the same way
            base = self._tensor(t._base).detach()
            moved = base.as_strided(t.size(), t.stride(), t.storage_offset())
        elif isinstance(t, torch.nn.Parameter):  # dynamo treats parameters as static: keep the type
            moved = torch.nn.Parameter(t.detach().to("meta", copy=self.fresh), requires_grad=t.requires_grad)
        else:
            moved = t.detach().to("meta", copy=self.fresh)
        if t.requires_grad and moved.is_leaf and not moved.requires_grad:
            moved.requires_grad_(True)
        self._done[id(t)] = (t, moved)
        if t.grad is not None and moved is not t and moved.grad is None:  # what an optimizer's step reads
            moved.grad = self._tensor(t.grad)
        self._copy_marks(t, moved)
        return moved

    def _copy_marks(self, old, new) -> None:
        """A tensor's Python attributes (dynamo's marks among them) onto its stand-in."""
        if new is old:
            return
        for name, value in list(vars(old).items()):
            if name not in vars(new):
                setattr(new, name, self.move(value, self.max_depth))

    def _module(self, module, depth: int):
        before = _registered_tensors(module)
        if self.collect:
            for t in before.values():
                self._tensor(t)
        else:
            module.to("meta")
            after = _registered_tensors(module)
            for name, old in before.items():
                self._done[id(old)] = (old, after[name])
                self._copy_marks(old, after[name])
        subs = list(module.modules())
        for sub in subs:
            self._done[id(sub)] = (sub, sub)
        for sub in subs:  # what Module.to leaves behind: plain attributes holding tensors
            for name, value in list(vars(sub).items()):
                if name not in _MODULE_REGISTRIES:
                    self._replace(value, depth, lambda new, sub=sub, name=name: vars(sub).__setitem__(name, new))
        return module

    def _tuple(self, obj: tuple, depth: int) -> tuple:
        items = [self.move(v, depth + 1) for v in obj]
        new = obj
        if any(a is not b for a, b in zip(items, obj)):
            new = _rebuild_tuple(obj, items)
        self._done[id(obj)] = (obj, new)
        return new


def _registered_tensors(module) -> dict:
    """Every parameter and buffer by its qualified name, shared ones under each name."""
    found = dict(module.named_parameters(remove_duplicate=False))
    found.update(module.named_buffers(remove_duplicate=False))
    return found


def _rebuild_tuple(obj: tuple, items: list) -> tuple:
    """A tuple of ``obj``'s type holding ``items``: plain, named, or a structseq (``torch.return_types``)."""
    if type(obj) is tuple:
        return tuple(items)
    if hasattr(obj, "_fields"):
        return type(obj)(*items)
    try:
        return type(obj)(items)
    except TypeError:  # a tuple type that cannot be rebuilt from its items: keep it as it was
        return obj


def _fields(obj: Any):
    """``(name, value)`` for an object's instance attributes: its ``__dict__``, then its slots."""
    own = getattr(obj, "__dict__", None)
    if isinstance(own, dict):
        yield from list(own.items())
    for cls in type(obj).__mro__:
        slots = cls.__dict__.get("__slots__", ())
        for name in (slots,) if isinstance(slots, str) else slots:
            if name in ("__dict__", "__weakref__"):
                continue
            try:
                yield name, getattr(obj, name)
            except AttributeError:  # a slot never assigned
                continue


def _set_field(obj: Any, name: str, value: Any) -> None:
    """Set an attribute without the class's ``__setattr__`` (frozen dataclasses, ``Module``)."""
    own = getattr(obj, "__dict__", None)
    if isinstance(own, dict) and name in own:
        own[name] = value
    else:
        object.__setattr__(obj, name, value)


@functools.cache
def _leaf_types() -> tuple:
    import torch

    return (
        type(None), bool, int, float, complex, str, bytes, bytearray, range, slice, type(Ellipsis),
        set, frozenset, enum.Enum, type, types.ModuleType, types.FunctionType, types.BuiltinFunctionType,
        types.CodeType, functools.partial, weakref.ref, torch.dtype, torch.device, torch.Size, torch.layout,
        torch.memory_format, torch.Generator,
    )


def _is_leaf(obj: Any) -> bool:
    """Values the walk does not enter: scalars, strings, types, functions, torch's descriptors.

    >>> _is_leaf("x"), _is_leaf(len), _is_leaf([1])
    (True, True, False)
    """
    return isinstance(obj, _leaf_types())


def standin_mode():
    """A dispatch mode for running stand-in graphs: meta->cpu copies yield CPU zeros.

    Used only inside compiled graphs (dynamo compiles nothing while a dispatch mode is active),
    so a graph whose ``.cpu()`` result feeds later CPU ops can still run on meta.
    """
    import torch

    from graphtool.capture import compat

    aten = torch.ops.aten
    device_put = torch.ops.prims.device_put.default

    class _StandinMode(compat.dispatch_mode_base()):
        supports_higher_order_operators = True  # torch.cond and friends come here too, not as an error

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            hop = compat.higher_order_name(func)
            if hop is not None:
                return _higher_order_on_meta(hop, func, args, kwargs)
            src = args[0] if args else None
            if isinstance(src, torch.Tensor) and src.device.type == "meta":
                if func is aten._to_copy.default:
                    dev = kwargs.get("device")
                    if dev is not None and torch.device(dev).type != "meta":
                        return torch.zeros(src.shape, dtype=kwargs.get("dtype") or src.dtype, device=dev)
                if func is device_put:  # .cpu() as inductor's decompositions write it
                    dev = args[1] if len(args) > 1 else kwargs.get("device")
                    if dev is not None and torch.device(dev).type != "meta":
                        return torch.zeros(src.shape, dtype=src.dtype, device=dev)
                if func is aten._local_scalar_dense.default:
                    return torch.zeros((), dtype=src.dtype).item()
            if func is aten.copy_.default and len(args) > 1 and isinstance(args[1], torch.Tensor):
                if args[1].device.type == "meta" and args[0].device.type != "meta":
                    return args[0]
            return func(*args, **kwargs)

    return _StandinMode()


def _higher_order_on_meta(name: str, func, args, kwargs):
    """A higher-order op of a stand-in graph, run without real data.

    On meta a predicate has no value of its own. When the stand-in replays the host values of a run
    on the model's own device (capture/standin/host_values.py), ``bool(pred)`` is the value that run's graph
    read, so ``cond`` takes the branch it took and ``while_loop`` runs as many times; with no value to
    read, ``cond`` runs its true branch (both branches return the same shapes, dtypes and devices,
    which is all a stand-in result carries) and ``while_loop`` returns its carried values (its body
    keeps their shapes). Everything else (``map_impl``, ``invoke_subgraph``, ``flex_attention``...)
    runs its own dense implementation, which needs no values."""
    import torch

    def known(pred) -> bool | None:
        try:
            return bool(pred)
        except Exception:  # a meta tensor with no recorded value
            return None

    if name == "cond" and len(args) >= 4 and isinstance(args[0], torch.Tensor) and args[0].device.type == "meta":
        pred, true_fn, false_fn, operands = args[:4]
        return (false_fn if known(pred) is False else true_fn)(*operands)
    if name == "while_loop" and len(args) >= 3:
        cond_fn, body_fn, carried = args[0], args[1], tuple(args[2])
        extra = tuple(args[3]) if len(args) > 3 else ()
        while known(cond_fn(*carried, *extra)):
            carried = tuple(body_fn(*carried, *extra))
        return tuple(t.clone() if isinstance(t, torch.Tensor) else t for t in carried)
    return func(*args, **kwargs)


def copy_to_meta(spec: ModelSpec, *, fresh: bool = False) -> ModelSpec:
    """A stand-in copy of a model the caller handed over as an object: nothing of theirs changes.

    The model and its inputs are deep-copied with every tensor :class:`MetaMover` reaches already
    mapped to its meta stand-in, so no tensor's data is copied and the originals are untouched
    (parameters, buffers, caches, gradients); tied weights stay tied and ``mark_static_address``
    marks move along, as :func:`to_meta` does. A tensor the walk does not reach is copied by
    ``deepcopy`` and then moved on the copy, which is graphtool's own. ``fresh``: tensors already on
    meta get new meta tensors too, so a copy of a stand-in (a pristine one kept for several traces)
    shares no tensor with it.

    >>> import torch
    >>> from pathlib import Path
    >>> lin = torch.nn.Linear(2, 2)
    >>> spec = ModelSpec(Path("m.py"), "m", lin, (torch.ones(1, 2),), borrowed=True)
    >>> copy = copy_to_meta(spec)
    >>> copy.model.weight.device, lin.weight.device, copy.model is lin
    (device(type='meta'), device(type='cpu'), False)
    """
    import copy

    from graphtool.errors import BadModelSpec

    free = _free_state(spec.model)  # a function's module-level modules and tensors, and its closure's
    found = reachable_tensors((spec.model, spec.args, spec.kwargs, free))
    mover = MetaMover(fresh=fresh)
    memo: dict[int, Any] = {tid: mover._tensor(t) for tid, t in found.items()}
    memo[id(memo)] = list(found.values())  # deepcopy's keep-alive list: the originals' ids stay theirs
    try:
        model, args, kwargs, copied = copy.deepcopy((spec.model, spec.args, spec.kwargs, free), memo)
    except Exception as exc:  # a lock, a file, a process group: objects Python cannot copy
        raise BadModelSpec(
            f"{spec.location}: graphtool needs a copy of the model for the accelerator stand-in, and Python could not "
            f"copy it: {type(exc).__name__}: {exc}",
            hint="pass a model built on the meta device (device='meta'), or run graphtool on a script",
        ) from None
    for key, value in free.items():
        if _optimizer_of(value) is not None:
            _track_step_as(_optimizer_of(value), _optimizer_of(copied[key]))
    rest = MetaMover()
    # a copied cache layer's ``self.device`` still names where the original's tensors live: the copy's tensors
    # are already stand-ins, so ``rest`` learns where each came from and moves such a field to meta
    rest.origins = {id(stand_in): original.device for original, stand_in in mover._done.values()}
    model = _rebind(model, rest.move(copied)) if copied else rest.move(model)
    capturable_as_on_a_gpu(list({id(o): o for o in map(_optimizer_of, copied.values()) if o is not None}.values()))
    return replace(spec, model=model, args=rest.move(args), kwargs=rest.move(kwargs), borrowed=False)


def _track_step_as(original: Any, copy: Any) -> None:
    """The wrapper an LR scheduler puts on its optimizer's ``step`` (it marks ``_opt_called``, which
    ``scheduler.step()`` reads), put on the copy too: ``deepcopy`` keeps only an optimizer's ``defaults``,
    ``state`` and ``param_groups``, and the original's wrapper holds a weak reference to the original."""
    wrapped = vars(original).get("step")
    if not getattr(wrapped, "_wrapped_by_lr_sched", False) or "step" in vars(copy):
        return
    func = type(copy).step
    copy_ref = weakref.ref(copy)

    @functools.wraps(func)
    def step(*args, **kwargs):
        opt = copy_ref()
        opt._opt_called = True
        return func.__get__(opt, type(opt))(*args, **kwargs)

    step._wrapped_by_lr_sched = True
    copy.step = step
    if hasattr(original, "_opt_called"):
        copy._opt_called = original._opt_called


def _stateful(value: Any) -> bool:
    """Whether a function's free value holds state the stand-in must move: a module, tensors, an optimizer,
    or an LR scheduler (its ``.optimizer``). A training step's optimizer left out would still hold the
    caller's parameters, not the stand-in's: it would see no gradient and step nothing."""
    import torch

    if isinstance(value, (torch.nn.Module, torch.Tensor)) or _optimizer_of(value) is not None:
        return True
    if isinstance(value, (list, tuple, dict)):
        return bool(reachable_tensors(value, depth=MAX_DEPTH - 2))
    return False


def _optimizer_of(value: Any) -> Any:
    """``value`` when it is an optimizer, its ``.optimizer`` when it is an LR scheduler, else None."""
    import torch

    if isinstance(value, torch.optim.Optimizer):
        return value
    if isinstance(value, (type, types.ModuleType)):
        return None
    try:
        opt = getattr(value, "optimizer", None)
    except Exception:  # a property that raises
        return None
    return opt if isinstance(opt, torch.optim.Optimizer) else None


def _functions_sharing(fn: types.FunctionType) -> list[types.FunctionType]:
    """``fn`` and every function it reaches by a global name in its own module (a helper that reads
    the same globals), so that all of them are rebound to the stand-in's globals."""
    todo, out, seen = [fn], [], set()
    while todo:
        f = todo.pop()
        if id(f) in seen:
            continue
        seen.add(id(f))
        out.append(f)
        for name in _global_names(f.__code__):
            value = f.__globals__.get(name)
            if isinstance(value, types.FunctionType) and value.__globals__ is fn.__globals__:
                todo.append(value)
    return out


def _global_names(code: types.CodeType) -> set[str]:
    names = set(code.co_names)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):  # a nested function, lambda or comprehension
            names |= _global_names(const)
    return names


def _free_state(model: Any) -> dict:
    """A plain function's state outside its arguments: ``{("global", name) | ("cell", fn index, i): value}``
    for each module-level module or tensor it (or a helper in its module) reads, and each closure cell
    holding one. ``deepcopy`` leaves functions as they are, so without this the stand-in copy of a
    function would still read the caller's modules on their own device."""
    if not isinstance(model, types.FunctionType):
        return {}
    free: dict = {}
    for index, f in enumerate(_functions_sharing(model)):
        for name in _global_names(f.__code__):
            if name in f.__globals__ and _stateful(f.__globals__[name]):
                free[("global", name)] = f.__globals__[name]
        for i, cell in enumerate(f.__closure__ or ()):
            try:
                value = cell.cell_contents
            except ValueError:  # an empty cell
                continue
            if _stateful(value):
                free[("cell", index, i)] = value
    return free


def _rebind(model: types.FunctionType, free: dict) -> types.FunctionType:
    """``model`` (and the helpers it calls in its module) as new functions over a copy of its module's
    globals in which the stateful names are ``free``'s copies; the caller's module is untouched."""
    functions = _functions_sharing(model)
    scope = dict(model.__globals__)
    scope.update({key[1]: value for key, value in free.items() if key[0] == "global"})
    rebound = []
    for index, f in enumerate(functions):
        cells = f.__closure__
        if cells:
            cells = tuple(types.CellType(free[("cell", index, i)]) if ("cell", index, i) in free else cell
                          for i, cell in enumerate(cells))
        new = types.FunctionType(f.__code__, scope, f.__name__, f.__defaults__, cells)
        new.__kwdefaults__, new.__qualname__, new.__module__ = f.__kwdefaults__, f.__qualname__, f.__module__
        new.__dict__.update(f.__dict__)
        rebound.append(new)
    for f, new in zip(functions, rebound):
        if scope.get(f.__name__) is f:
            scope[f.__name__] = new  # a helper called by name reaches the rebound copy
    return rebound[0]


def reachable_tensors(obj: Any, depth: int = 0) -> dict[int, Any]:
    """Every tensor :class:`MetaMover` would move from ``obj``, by id, found by the same walk without
    changing anything.

    >>> import torch
    >>> lin = torch.nn.Linear(2, 2)
    >>> found = reachable_tensors(([lin], {"x": torch.ones(1)}))
    >>> len(found), lin.weight.device.type
    (3, 'cpu')
    """
    walk = MetaMover(collect=True)
    walk.move(obj, depth)
    return walk.found()
