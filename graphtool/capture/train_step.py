"""A model whose call is a whole training step: it runs its own ``backward()`` (and optimizer).

Many people compile the step, not the model::

    def train_step(x, y):
        loss = loss_fn(net(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss

    model = train_step

graphtool must then never run a backward of its own on the step's output (autograd has freed that
graph: "Trying to backward through the graph a second time"), nor reset the gradients between the
loop's steps (the step manages them). :class:`StepWatch` decides, around the first call, whether the
call ran a backward: a compiled region's backward graph ran inside it, or a parameter's ``.grad``
changed, or a backward freed the autograd graph of the tensors it returned. A script may also say so: a
module-level ``runs_backward = True`` (or ``False``, to say it does not); from Python, an attribute of the
step itself (``train_step.runs_backward = True``) before ``graphtool.trace(train_step, x, y)``.

The optimizer's state (``exp_avg``, ``exp_avg_sq``, ``step``, ``momentum_buffer``) enters the
optimizer's graph as inputs it writes in place: :func:`optimizer_state_names` names each tensor as
``opt.state[net.0.weight].exp_avg``, the optimizer by the name the step's code uses for it.

Example::

    >>> from graphtool.capture.user.script import load_model
    >>> from graphtool.capture.tracer import trace_model
    >>> cap = trace_model(load_model("tests/fixtures/train_step/adamw.py"))
    >>> cap.own_step.kind, cap.own_step.evidence
    ('train_step', 'a compiled backward graph ran inside the call')
"""

from __future__ import annotations

import inspect
import sys
from dataclasses import dataclass
from typing import Any

#: the module-level name a script sets to say that its model's call runs its own backward
DECLARATION = "runs_backward"


@dataclass(frozen=True)
class OwnStep:
    """The model's call is a step that runs its own backward (``train_step``), or an optimizer's
    ``step`` alone (``optimizer_step``): graphtool runs no backward of its own and leaves ``.grad`` alone."""

    kind: str  # train_step | optimizer_step
    evidence: str  # why graphtool decided so, in words

    def to_dict(self) -> dict:
        return {"kind": self.kind, "evidence": self.evidence}


def declared(spec: Any) -> bool | None:
    """The step's own ``runs_backward`` attribute, else the script's module-level one: True, False, or None
    when neither says."""
    said = getattr(spec.model, DECLARATION, None)
    if not isinstance(said, bool):
        module = sys.modules.get(getattr(spec, "module_name", None) or "")
        said = getattr(module, DECLARATION, None) if module is not None else None
    return said if isinstance(said, bool) else None


def optimizer_of_step(model: Any) -> Any:
    """The optimizer whose bound ``step`` the model is (``model = opt.step``), else None."""
    import torch

    owner = getattr(model, "__self__", None)
    return owner if isinstance(owner, torch.optim.Optimizer) else None


class StepWatch:
    """Around the model's first call: did it run a backward of its own?

    ``calls`` is the tracing backend's :class:`~graphtool.capture.steady_state.CallLogger`: a region's
    backward graph logged during the call ran inside it. ``params`` are the model's parameters: a
    ``.grad`` that appeared, was replaced or was written during the call was computed inside it."""

    def __init__(self, spec: Any, calls: Any, params: list):
        self.spec = spec
        self.calls = calls
        self.params = params
        self.before = len(calls.calls)
        self.grads = [_grad_key(p) for p in params]
        from graphtool.capture import compat

        self.autograd_captures = compat.compiled_autograd_captures()

    def verdict(self, out: Any = None) -> OwnStep | None:
        said = declared(self.spec)
        if said is False:
            return None
        if optimizer_of_step(self.spec.model) is not None:
            return OwnStep("optimizer_step", "the model is an optimizer's step()")
        if said:
            return OwnStep("train_step", f"the script sets {DECLARATION} = True")
        if any(c.graph == "backward" for c in self.calls.calls[self.before:]):
            return OwnStep("train_step", "a compiled backward graph ran inside the call")
        from graphtool.capture import compat

        if compat.compiled_autograd_captures() > self.autograd_captures:
            return OwnStep("train_step", "compiled autograd captured the backward the call ran")
        changed = [p for p, old in zip(self.params, self.grads) if _grad_key(p) != old and p.grad is not None]
        if changed:
            return OwnStep("train_step", "the call computed parameters' gradients (.grad changed)")
        if graph_freed(out):
            return OwnStep("train_step", "a backward inside the call freed its output's autograd graph")
        return None


#: what autograd raises on reading a saved tensor a backward has already freed
_FREED = ("freed", "backward through the graph a second time")


def graph_freed(out: Any, limit: int = 500) -> bool:
    """Whether a backward already ran through the autograd graph of ``out``'s tensors and freed what it
    saved (an eager ``loss.backward()`` inside the call, that left no other trace: the gradients it
    computed zeroed again by ``zero_grad``). Reads the saved tensors of up to ``limit`` nodes."""
    from graphtool.capture.tensors import iter_tensors

    todo = [t.grad_fn for t in iter_tensors(out) if getattr(t, "grad_fn", None) is not None]
    seen: set[int] = set()
    while todo and len(seen) < limit:
        node = todo.pop()
        if node is None or id(node) in seen:
            continue
        seen.add(id(node))
        for name in dir(node):
            if not name.startswith("_saved_"):
                continue
            try:
                getattr(node, name)
            except RuntimeError as exc:
                if any(word in str(exc) for word in _FREED):
                    return True
        todo.extend(fn for fn, _ in getattr(node, "next_functions", ()))
    return False


def _grad_key(p) -> tuple | None:
    g = p.grad
    return None if g is None else (id(g), g._version)


def optimizers_reached(model: Any, script: Any = None) -> list[tuple[str, Any]]:
    """``(name, optimizer)`` for every ``torch.optim.Optimizer`` the step reaches: the model's own
    (``opt.step`` as the model: named as the script module ``script`` names it, else ``optimizer``),
    and those its code names through globals and closure cells, or through an LR scheduler's
    ``.optimizer`` (helpers of the same script included)."""
    import torch

    found: dict[int, tuple[str, Any]] = {}
    own = optimizer_of_step(model)
    seen: set[int] = set()

    def visit(fn: Any) -> None:
        fn = inspect.unwrap(fn) if callable(fn) else fn
        code = getattr(fn, "__code__", None)
        if code is None or id(fn) in seen:
            return
        seen.add(id(fn))
        names: list[str] = []
        stack = [code]
        while stack:
            c = stack.pop()
            names.extend(c.co_names)
            stack.extend(k for k in c.co_consts if inspect.iscode(k))
        g = getattr(fn, "__globals__", {})
        values = [(n, g[n]) for n in dict.fromkeys(names) if n in g]
        for n, cell in zip(code.co_freevars, getattr(fn, "__closure__", None) or ()):
            try:
                values.append((n, cell.cell_contents))
            except ValueError:
                continue
        for name, value in values:
            opt = getattr(value, "optimizer", None) if not isinstance(value, torch.optim.Optimizer) else value
            if isinstance(opt, torch.optim.Optimizer):
                found.setdefault(id(opt), (name if opt is value else f"{name}.optimizer", opt))
            elif inspect.isfunction(value) and value.__module__ == getattr(fn, "__module__", None):
                visit(value)

    if own is None:
        visit(model)
    else:
        name = next((n for n, v in vars(script).items() if v is own and not n.startswith("_")), None) if script else None
        found[id(own)] = (name or "optimizer", own)
    return list(found.values())


def optimizer_state_names(model: Any, param_names: dict[int, str], script: Any = None) -> dict[int, tuple[str, str]]:
    """id(tensor) -> ("optimizer_state", ``opt.state[net.0.weight].exp_avg``) for every tensor in the
    state of the optimizers the step reaches (see :func:`optimizers_reached`); a parameter graphtool has
    no name for is named by its place, ``param_groups[0].params[1]``. Also id(parameter) ->
    ("parameter", that place) for those parameters, each parameter's ``.grad`` as ("gradient", ``net.0.weight.grad``),
    and every tensor in ``param_groups`` (a tensor lr)
    as ("optimizer_state", ``opt.param_groups[0].lr``)."""
    import torch

    names: dict[int, tuple[str, str]] = {}
    for opt_name, opt in optimizers_reached(model, script):
        for g, group in enumerate(opt.param_groups):
            for i, p in enumerate(group["params"]):
                param_names.setdefault(id(p), f"{opt_name}.param_groups[{g}].params[{i}]")
                names.setdefault(id(p), ("parameter", param_names[id(p)]))
                if isinstance(p.grad, torch.Tensor):  # what the optimizer's graph reads
                    names.setdefault(id(p.grad), ("gradient", f"{param_names[id(p)]}.grad"))
            for key, value in group.items():
                if isinstance(value, torch.Tensor):
                    names.setdefault(id(value), ("optimizer_state", f"{opt_name}.param_groups[{g}].{key}"))
        for p, state in opt.state.items():
            where = param_names.get(id(p), "?")
            for key, value in state.items() if isinstance(state, dict) else ():
                if isinstance(value, torch.Tensor):
                    names.setdefault(id(value), ("optimizer_state", f"{opt_name}.state[{where}].{key}"))
    return names


def script_parameter_names(spec: Any) -> dict[int, str]:
    """id(parameter) -> FQN under the script's module-level modules (``net.0.weight`` for a global ``net``):
    names for the parameters of an optimizer whose ``step`` is the model, which reaches no module itself."""
    import torch

    module = sys.modules.get(getattr(spec, "module_name", None) or "")
    names: dict[int, str] = {}
    for var, value in (vars(module).items() if module is not None else ()):
        if isinstance(value, torch.nn.Module) and not var.startswith("_"):
            for fqn, p in value.named_parameters(remove_duplicate=False):
                names.setdefault(id(p), f"{var}.{fqn}")
    return names


def optimizer_states(model: Any) -> list:
    """``(optimizer, a copy of its state_dict, [(parameter, a copy of it)])`` for each optimizer a training step
    reaches (:func:`optimizers_reached`): what the step writes, to put back with :func:`put_back_optimizer`."""
    import copy

    out = []
    for _name, opt in optimizers_reached(model):
        params = [(p, p.detach().clone()) for group in opt.param_groups for p in group["params"]]
        out.append((opt, copy.deepcopy(opt.state_dict()), params))
    return out


def put_back_optimizer(opt: Any, state: dict) -> None:
    """Load a copy of ``state`` (from :func:`optimizer_states`): ``load_state_dict`` keeps the very tensors it is
    given where their dtype and device already fit, so loading ``state`` itself would let the next step write the
    saved copy in place, and a later put-back would restore that step's state."""
    import copy

    opt.load_state_dict(copy.deepcopy(state))
