"""Capture the autograd graph torch's engine would run, as plain records.

The model's forward runs eagerly on its example inputs; the graph is walked from the outputs'
``grad_fn`` through ``next_functions``. Forward hooks attribute each autograd node to the module
whose forward created it: when a module's forward returns, the new nodes reachable from its
outputs (stopping at its inputs' nodes and at nodes already attributed) are its own. Inner modules
return first, so every node lands in the innermost module that made it.

Example::

    >>> from graphtool.capture.user.script import load_model
    >>> g = capture_autograd(load_model("examples/mlp.py"))
    >>> sorted(n.name for n in g.nodes if n.kind == "parameter")
    ['fc1.bias', 'fc1.weight', 'fc2.bias', 'fc2.weight']
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass

from graphtool.capture import compat
from graphtool.capture.tensors import iter_tensors
from graphtool.capture.user.boundary import running_user_code
from graphtool.capture.user.input_names import argument_names, named_modules, named_state
from graphtool.capture.user.script import ModelSpec, with_call_detail
from graphtool.errors import UserCodeFailed


@dataclass(frozen=True)
class AutogradNode:
    id: int  # position in walk order (stable for a given model)
    op: str  # the autograd node's class, e.g. AddmmBackward0; AccumulateGrad for leaves
    kind: str  # op | parameter | user_input | leaf
    name: str  # op name, or the leaf's FQN / argument name
    shape: tuple | None  # leaves only
    dtype: str | None
    module: tuple[tuple[str, str], ...]  # (fqn, class) from outermost to innermost
    saved: tuple[tuple[str, tuple], ...]  # (_saved_ attribute, shape), with saved=True
    checkpointed: bool = False  # made inside torch.utils.checkpoint: recomputed in backward


@dataclass(frozen=True)
class AutogradGraph:
    nodes: tuple[AutogradNode, ...]
    edges: tuple[tuple[int, int], ...]  # (next function, function): data flows from inputs to outputs
    outputs: tuple[tuple[int, int], ...]  # (output index, node id)


def capture_autograd(spec: ModelSpec, *, saved: bool = False, modules: bool = True) -> AutogradGraph:
    """``modules=False`` skips attributing nodes to modules (nothing to fold by)."""
    torch = compat.import_torch()
    module_names, classes, hooks = {}, {}, []
    assigned: dict = {}
    checkpointed: set = set()
    boundary_stack: list[tuple[set, bool]] = []
    ckpt_file = _checkpoint_file()
    reached = named_modules(spec.model)  # a function's global modules too
    classes = {fqn: type(mod).__name__ for fqn, mod in reached}
    compiling = torch.compiler.is_compiling
    if modules and reached:
        for fqn, mod in reached:
            module_names.setdefault(id(mod), fqn)

        def pre(mod, args, kwargs):
            if compiling():  # a module called inside torch.cond's branch, which dynamo traces: not eager autograd
                return
            inside = bool(boundary_stack and boundary_stack[-1][1]) or _called_from(ckpt_file)
            boundary_stack.append(({t.grad_fn for t in iter_tensors((args, kwargs)) if t.grad_fn is not None}, inside))

        def post(mod, args, kwargs, output):
            if compiling():
                return
            # every node made during this call lies between its outputs and its inputs' nodes;
            # walk through nodes inner modules already claimed, claim the rest
            stop, inside = boundary_stack.pop() if boundary_stack else (set(), False)
            fqn = module_names.get(id(mod), "")
            todo = [t.grad_fn for t in iter_tensors(output) if t.grad_fn is not None]
            seen = set()
            while todo:
                fn = todo.pop()
                if fn is None or fn in seen or fn in stop or type(fn).__name__ == "AccumulateGrad":
                    continue
                seen.add(fn)
                assigned.setdefault(fn, fqn)
                if inside:
                    checkpointed.add(fn)
                todo.extend(nf for nf, _ in fn.next_functions)

        for mod in {id(m): m for _, m in reached}.values():
            hooks.append(mod.register_forward_pre_hook(pre, with_kwargs=True))
            hooks.append(mod.register_forward_hook(post, with_kwargs=True))
    try:
        # a region_activation_memory_budget has no effect on the eager autograd graph (torch raises on it there)
        with running_user_code("the model raised on its example inputs", where=spec.location), torch.enable_grad(), \
                compat.region_budgets_in_eager():
            out = spec.model(*spec.args, **spec.kwargs)
    except UserCodeFailed as err:
        raise with_call_detail(err, spec) from None
    finally:
        for h in hooks:
            h.remove()
    return _walk(torch, spec, out, assigned, classes, saved, checkpointed)


def _checkpoint_file() -> str:
    import torch.utils.checkpoint as checkpoint_module

    return os.path.normcase(os.path.abspath(checkpoint_module.__file__))


def _called_from(filename: str) -> bool:
    """Whether a frame of ``filename`` is on the stack (a module called by torch.utils.checkpoint)."""
    try:
        frame = sys._getframe(2)
    except ValueError:  # a shallower stack
        return False
    while frame is not None:
        if os.path.normcase(os.path.abspath(frame.f_code.co_filename)) == filename:
            return True
        frame = frame.f_back
    return False


def _module_path(fqn: str | None, classes: dict) -> tuple[tuple[str, str], ...]:
    """One (fqn, class) per FQN level, containers (ModuleList, Sequential) included: the path's
    N-th entry is the module at depth N, which is what ``render --depth N`` folds at."""
    if not fqn:
        return ()
    parts = fqn.split(".")
    return tuple((".".join(parts[:i]), classes.get(".".join(parts[:i]), "")) for i in range(1, len(parts) + 1))


def _walk(torch, spec, out, assigned, classes, want_saved, checkpointed=frozenset()) -> AutogradGraph:
    params = {}
    params.update({id(p): ("parameter", n) for n, p in reversed(named_state(spec.model)[0])})
    inputs = argument_names(spec)
    ids: dict = {}
    order: list = []
    roots = [(i, t.grad_fn) for i, t in enumerate(iter_tensors(out)) if t.grad_fn is not None]
    stack = [fn for _, fn in reversed(roots)]
    edges = []
    while stack:
        fn = stack.pop()
        if fn in ids:
            continue
        ids[fn] = len(order)
        order.append(fn)
        for nf, _ in reversed(fn.next_functions):
            if nf is not None and nf not in ids:
                stack.append(nf)
    for fn in order:
        for nf, _ in fn.next_functions:
            if nf is not None:
                edges.append((ids[nf], ids[fn]))
    nodes = []
    for fn in order:
        op = type(fn).__name__
        if op == "AccumulateGrad":
            var = fn.variable
            kind, name = params.get(id(var), (None, None))
            if kind is None:
                name = inputs.get(id(var))
                kind = "user_input" if name else "leaf"
                name = name or f"leaf {tuple(var.shape)}"
            owner = name.rsplit(".", 1)[0] if kind == "parameter" and "." in name else None
            nodes.append(AutogradNode(ids[fn], op, kind, name, tuple(var.shape), str(var.dtype).replace("torch.", ""),
                                      _module_path(owner, classes), ()))
        else:
            # reentrant checkpoint: one CheckpointFunctionBackward node stands for the whole block
            ckpt = fn in checkpointed or op.startswith("CheckpointFunction")
            nodes.append(AutogradNode(ids[fn], op, "op", op, None, None, _module_path(assigned.get(fn), classes),
                                      _saved_shapes(torch, fn) if want_saved and not ckpt else (), ckpt))
    return AutogradGraph(tuple(nodes), tuple(edges), tuple((i, ids[fn]) for i, fn in roots))


def _saved_shapes(torch, fn) -> tuple[tuple[str, tuple], ...]:
    return tuple((name, tuple(val.shape)) for name, val in compat.saved_values(fn) if isinstance(val, torch.Tensor))
