"""The optimizer state a script's training loop will hold: ``get_optimizer(model)``.

A script may define ``get_optimizer(model)`` returning the optimizer its launch builds (Adam's two
moments per parameter, SGD's momentum...). Its state is created lazily by the first ``step()``, so
graphtool steps it once, on the gradients the traced step left, and counts the bytes of every
tensor in ``optimizer.state`` (each storage once).
"""

from __future__ import annotations

import sys
from typing import Any, Optional

#: the function a script may define
OPTIMIZER_FACTORY = "get_optimizer"


def optimizer_state_bytes(spec: Any) -> Optional[int]:
    """Bytes of the state ``get_optimizer(spec.model)`` holds after one step; None when the script
    defines no ``get_optimizer``."""
    optimizer = stepped_optimizer(spec)
    return state_bytes(optimizer) if optimizer is not None else None


def stepped_optimizer(spec: Any, prepare: Any = None, around_step: Any = None) -> Any:
    """The script's ``get_optimizer(spec.model)`` after one ``step()``, None when it defines none.
    ``prepare(optimizer)`` runs before the step; the step runs inside the context ``around_step()`` returns."""
    import contextlib

    from graphtool.capture.user.boundary import running_user_code

    factory = optimizer_factory(spec)
    if factory is None:
        return None
    with running_user_code(f"calling {OPTIMIZER_FACTORY}(model) and stepping it once", where=str(spec.path)):
        optimizer = factory(spec.model)
        if prepare is not None:
            prepare(optimizer)
        with around_step() if around_step is not None else contextlib.nullcontext():
            optimizer.step()
    return optimizer


def optimizer_factory(spec: Any) -> Any:
    """What builds the loop's optimizer from the model: the ``optimizer=`` given with the model, else the script's
    ``get_optimizer``; None when there is neither."""
    given = getattr(spec, "optimizer", None)
    if callable(given):
        return given
    module = sys.modules.get(getattr(spec, "module_name", "") or "")
    factory = getattr(module, OPTIMIZER_FACTORY, None) if module is not None else None
    return factory if callable(factory) else None


def state_bytes(optimizer: Any) -> int:
    """The bytes of every tensor in ``optimizer.state``, each storage once."""
    from graphtool.capture.tensors import iter_tensors

    seen, total = set(), 0
    for state in optimizer.state.values():
        for t in iter_tensors(state):
            storage = t.untyped_storage()
            key = (storage.data_ptr(), t.device) if t.device.type != "meta" else id(storage)
            if key not in seen:
                seen.add(key)
                total += storage.nbytes()
    return total
