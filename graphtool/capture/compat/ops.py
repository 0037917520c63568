"""torch's ops and tensors below the public API (``torch._ops``, ``torch.utils._python_dispatch``,
``torch.utils._pytree``, ``torch.multiprocessing.reductions``): higher-order operators (their names, and
whether an exception came from one), the dispatch-mode base and whether a mode can take higher-order ops, an
op's schema arguments, a pytree node's children, and what a tensor or autograd node holds: whether it is a
view, a key and a weak reference for its storage, the values autograd saved for backward."""

from __future__ import annotations

import importlib
from typing import Any

from graphtool.capture.compat._lookup import _require


def pytree_children(obj: Any) -> list[Any] | None:
    """The children of ``obj`` when torch's pytree knows its type (a registered node such as
    transformers' ModelOutput or a cache class), else None (a leaf, or a type pytree never heard of)."""
    nodes = _require("torch.utils._pytree", "SUPPORTED_NODES")
    entry = nodes.get(type(obj))
    if entry is None:
        return None
    children, _context = entry.flatten_fn(obj)
    return list(children)


def storage_key(t: Any) -> Any:
    """A key equal for two tensors exactly when they share storage (also for fake/meta tensors): the
    storage's :func:`storage_weak_ref`, which compares equal by the storage it points at."""
    return storage_weak_ref(t)


def higher_order_name(func: Any) -> str | None:
    """The name of a higher-order operator (``cond``, ``while_loop``, ``map_impl``, ``invoke_subgraph``,
    ``flex_attention``) a dispatch mode is handed, else None (an aten op)."""
    return func.name() if isinstance(func, higher_order_operator_type()) else None


def higher_order_in_traceback(exc: BaseException) -> str | None:
    """The higher-order operator (``cond``, ``while_loop``, ``map``, ``flex_attention``...) whose own
    code ``exc`` was raised in, by torch's module for it (``torch/_higher_order_ops/<name>.py``), else None.
    An error there while graphtool runs a model its own way (on fake tensors, under a dispatch mode)
    is graphtool's limit, not the user's mistake."""
    import os
    import traceback

    marker = f"{os.sep}torch{os.sep}_higher_order_ops{os.sep}"
    flex = os.path.join("torch", "nn", "attention", "flex_attention.py")  # its eager checks, before the op
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        if type(exc).__name__ == "UncapturedHigherOrderOpError":
            return "a higher-order op"
        for frame in traceback.extract_tb(exc.__traceback__):
            if frame.filename.endswith(flex):
                return "flex_attention"
            if marker in frame.filename:
                name = os.path.splitext(os.path.basename(frame.filename))[0]
                return "a higher-order op" if name in ("utils", "__init__") else name
        exc = exc.__cause__ or exc.__context__
    return None


def dispatch_mode_base():
    """``TorchDispatchMode``, the base of the stand-in's data-faking mode."""
    return _require("torch.utils._python_dispatch", "TorchDispatchMode")


def higher_order_operator_type():
    """``torch._ops.HigherOrderOperator``: ``torch.cond``, ``while_loop``, ``map``, ``invoke_subgraph``,
    flex attention... A dispatch mode sees them only with ``supports_higher_order_operators`` set."""
    return _require("torch._ops", "HigherOrderOperator")


def op_arguments(op: Any) -> list:
    """An ATen op overload's schema arguments (``.name``, ``.default_value``): ``op._schema.arguments``."""
    return list(op._schema.arguments)




def saved_values(grad_fn: Any) -> list[tuple[str, Any]]:
    """What an autograd node saved for backward, from its ``_saved_<name>`` attributes (the way
    torchviz reads them): ``[(name, value)]``. Empty once backward has freed them."""
    found = []
    for attr in sorted(a for a in dir(grad_fn) if a.startswith("_saved_")):
        try:
            found.append((attr[len("_saved_"):], getattr(grad_fn, attr)))
        except Exception:  # freed by backward (RuntimeError), or a value the binding cannot return
            continue
    return found


def higher_order_op_name(target: Any) -> str | None:
    """``higher_order.<name>`` for a higher-order operator (``with_effects``, ``cond``), as torch's
    graph printing names it; None for anything else."""
    ops = importlib.import_module("torch._ops")
    hop = getattr(ops, "HigherOrderOperator", None)
    if hop is not None and isinstance(target, hop):
        return f"higher_order.{target.name()}"
    return None


def is_view(t: Any) -> bool:
    """Whether a tensor is a view of another (``Tensor._is_view``)."""
    return bool(t._is_view())


def storage_weak_ref(t: Any) -> Any:
    """A weak reference to ``t``'s storage (``.expired()``, ``.cdata``): torch's ``StorageWeakRef``."""
    cls = _require("torch.multiprocessing.reductions", "StorageWeakRef")
    return cls(t.untyped_storage())
