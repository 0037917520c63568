"""A session's loads of one script: the script runs once, every trace after the first gets the
same model back, its state put back as the object API puts a caller's model back.

A session (:class:`graphtool.commands.session.Session`, one per model and command on the CLI) may trace
a model many times: on its own device, on the accelerator stand-in, on its own device again to record
the host values the stand-in lacks, under ``--bench``, for each question asked. Running the script
for each would build the model each time (a model that takes 20 s to build cost a minute) and repeat
the script's side effects (prints, files, downloads). :class:`LoadOnce` runs it once:

- the own-device spec is handed out again with its state put back
  (:class:`~graphtool.capture.model_object.ModelObject`'s: buffers, inputs, ``.grad``, ``training``
  flags, grad mode, random number generators), taken right after the script ran;
- the stand-in is a meta copy (:func:`~graphtool.capture.standin.meta.copy_to_meta`) of the model as
  the script built it, taken before the model first ran; each stand-in trace gets a fresh copy of it;
- a model on a GPU is its own stand-in (the trace runs there), handed out as the own-device spec is;
- another factory of the same script (``get_distributed_model`` beside ``get_model_and_inputs``) is
  called on the module already imported: the script itself does not run again;
- a model traced under a wrapper that changes it in place (``--fsdp2``'s ``fully_shard``, ``--ddp``'s
  hooks) serves a later use (``--bench``, ``report``'s memory under the wrapper) from a deep copy
  taken before (``want_plain``, set by a question that will need one).

The script still runs more than once where a second run is the point or cannot be avoided, and each
place says so:

- another rank's model: ``--ddp``'s rank check builds rank 1 as rank 1's process would (its script may
  read its rank), and builds again each rank it traces (one whose model differs from rank 0's);
- lint's children: one process per script, each runs it once (the parent never imports it); with
  ``--max-peak-memory`` a second child per script predicts the step's peak (``graphtool memory --fit``
  in :mod:`graphtool.commands.peak_worker`), so the script runs there once more;
- a third use after a wrapper changed the model in place, or a wrapped use with no copy kept;
- a model that cannot be copied (a lock, a process group, a model the script wrapped in DDP or sharded
  itself): its stand-in is built afresh, as before.

What is not put back, as for the object API: plain Python values the forward changes (a step counter),
and lazy modules' parameters once a forward has materialised them.

Example::

    >>> once = LoadOnce(standin=True)
    >>> a = once.own(("examples/mlp.py", None, None, ()))
    >>> b = once.own(("examples/mlp.py", None, None, ()))
    >>> standin, accel = once.standin(("examples/mlp.py", None, None, ()))
    >>> a is b, once.runs, accel, next(standin.model.parameters()).device.type
    (True, 1, 'meta', 'meta')
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, replace
from typing import Any, Optional

from graphtool.capture.user.script import ModelSpec, load_model

#: (target, entry, device, factory_args): one loaded spec each
Key = tuple


@dataclass
class _Loaded:
    spec: ModelSpec
    state: Any  # model_object._State, taken right after the script ran
    accel: str  # "meta" or "cuda": where the stand-in traces
    template: Optional[ModelSpec] = None  # a pristine meta copy, taken before the model first ran
    copyable: bool = True  # False: Python cannot copy the model (each stand-in is built afresh)
    plain: Optional[ModelSpec] = None  # a deep copy for a plain use after a wrapper changed ``spec`` in place
    handed: bool = False  # ``spec`` was handed out: it may have run, its state is put back before the next use
    dirty: bool = False  # a trace ran (on ``spec`` or a stand-in): the random generators are put back
    wrapped: bool = False  # a wrapper (--ddp, --fsdp2) traced ``spec`` and may have changed it in place


class LoadOnce:
    """The loads of one command for one model; see the module. ``standin``: the command traces the
    stand-in (a pristine meta copy is kept once the model has run); ``plain``: the command traces the
    model under a wrapper and also plainly (a deep copy is kept for the plain use)."""

    def __init__(self, *, standin: bool = False, plain: bool = False):
        self.want_standin = standin
        self.want_plain = plain
        self._loaded: dict[Key, _Loaded] = {}
        self._modules: dict[Any, str] = {}  # (target, device) -> the imported module's name in sys.modules
        #: how many times the script ran (imported afresh) in this command
        self.runs = 0

    def own(self, key: Key, *, wrapped: bool = False) -> ModelSpec:
        """The model on its own device, as the script built it (its state put back after an earlier
        trace). ``wrapped``: this trace runs it under a wrapper that may change it in place."""
        loaded = self._load(key)
        if loaded.wrapped:  # a wrapper changed the model in place: a copy taken before, or the script afresh
            if loaded.plain is None:  # no copy kept: this use needs the script run afresh
                return self._run(key, again=True)
            spec, loaded.plain = loaded.plain, None
            return spec
        if not loaded.handed:  # the copies a later use needs, taken before the model first runs
            if self.want_standin and loaded.accel == "meta" and loaded.copyable:
                loaded.template = _meta_copy(loaded.spec)
                loaded.copyable = loaded.template is not None
            if self.want_plain and wrapped:
                loaded.plain = deep_copy(loaded.spec)
        self._put_back(loaded)
        loaded.handed = True
        loaded.wrapped = loaded.wrapped or wrapped
        return loaded.spec

    def standin(self, key: Key) -> tuple[ModelSpec, str]:
        """``(spec, accelerator)`` for a stand-in trace: a fresh meta copy of the model as the script
        built it (``"meta"``), or the model itself where it lives on a GPU (``"cuda"``). A model that
        cannot be copied is built afresh (the caller moves it to meta in place, as before)."""
        from graphtool.capture.standin.meta import copy_to_meta

        loaded = self._load(key)
        if loaded.accel == "cuda":
            return self.own(key), "cuda"
        if not loaded.copyable:
            return self._run(key, again=True), "meta"
        self._put_back(loaded)  # the random number generators and grad mode, as a fresh load had them
        if loaded.template is not None:
            return copy_to_meta(loaded.template, fresh=True), "meta"
        # the model has not run yet: copied as it is
        copied = _meta_copy(loaded.spec) if not loaded.handed else None
        if copied is None:
            loaded.copyable = False
            return self._run(key, again=True), "meta"
        return copied, "meta"

    def accelerator(self, key: Key) -> str:
        """Where :meth:`standin` traces ``key``'s model: ``"cuda"`` (the model itself, on its GPU) or ``"meta"``."""
        return self._load(key).accel

    def _put_back(self, loaded: _Loaded) -> None:
        if loaded.dirty:
            loaded.state.restore(final=False)
        loaded.dirty = True

    def _load(self, key: Key) -> _Loaded:
        loaded = self._loaded.get(key)
        if loaded is not None:
            return loaded
        from graphtool.capture.model_object import _State
        from graphtool.capture.standin.meta import accelerator_of

        spec = self._run(key)
        accel = accelerator_of(spec)
        loaded = self._loaded[key] = _Loaded(spec, _State(spec), accel, copyable=not distributed(spec.model))
        return loaded

    def _run(self, key: Key, *, again: bool = False) -> ModelSpec:
        """The spec of ``key``: the script runs unless this command already imported it for the same
        device, in which case only the factory is called on the module. ``again``: the script runs
        again, where its model cannot be copied (a module-level ``model`` would be the same object)."""
        import sys

        target, entry, device, factory_args = key
        name = None if again else self._modules.get((target, device))
        module = sys.modules.get(name) if name else None
        spec = load_model(target, entry=entry, device=device, factory_args=factory_args, module=module)
        if module is None:
            self.runs += 1
            self._modules[(target, device)] = spec.module_name
        return spec


def _meta_copy(spec: ModelSpec) -> Optional[ModelSpec]:
    """The pristine stand-in, or None where Python cannot copy the model (a lock, a process group)."""
    from graphtool.capture.standin.meta import copy_to_meta
    from graphtool.errors import BadModelSpec

    try:
        return copy_to_meta(spec, fresh=True)  # a model built on meta (--device meta) shares no tensor with it
    except BadModelSpec:
        return None


def deep_copy(spec: ModelSpec) -> Optional[ModelSpec]:
    """``spec`` with its model and inputs deep-copied, or None where Python cannot copy them."""
    try:
        model, args, kwargs = copy.deepcopy((spec.model, spec.args, spec.kwargs))
    except Exception:  # an object Python cannot copy: the plain use runs the script afresh
        return None
    return replace(spec, model=model, args=args, kwargs=kwargs)


#: classes that hold a process group or sharded parameters: a model holding one is not copied
_DISTRIBUTED = frozenset({"DistributedDataParallel", "FSDPModule", "FullyShardedDataParallel", "DTensor"})


def distributed(model: Any) -> bool:
    """Whether the script wrapped or sharded the model itself (DDP, FSDP, DTensor parameters): such a
    model holds its process group, and its stand-in is built afresh under the stand-in's own group.

    >>> import torch
    >>> distributed(torch.nn.Linear(2, 2))
    False
    """
    import torch

    if not isinstance(model, torch.nn.Module):
        return False
    for m in model.modules():
        if any(c.__name__ in _DISTRIBUTED for c in type(m).__mro__):
            return True
    return any(any(c.__name__ in _DISTRIBUTED for c in type(p).__mro__) for p in model.parameters())
