"""Run a model's step under FSDP2 (``fully_shard``) the way a multi-GPU launch would, on one CPU process.

torch's fake process group (``init_process_group("fake")``) makes rank 0 of any world size in one
process: ``fully_shard`` shards each parameter as that world size does (dim 0 split into
``ceil(n / world_size)`` rows, padded), and its collectives return without talking to anyone. So the
step runs as rank 0 runs it: the same hooks, the same graphs, the same collectives with the same
sizes. The other ranks' shards follow from FSDP2's rule (rank ``r`` holds rows ``r*chunk`` up to
``(r+1)*chunk``); the graphs see only unsharded parameters (FSDP2's hooks run outside them unless
``torch._dynamo.config.skip_fsdp_hooks`` is False), so every rank compiles the same graphs. Tests
compare all of it with real gloo runs of 2 and 4 processes.

The convention: graphtool calls ``fully_shard`` on every module inside each ``nn.ModuleList`` of the
model (the blocks), then on the root, then ``torch.compile(model)``. A script's
``get_distributed_model(world_size)`` may return a model it sharded itself (and compiled per block):
it is traced as given. A script's ``get_optimizer(model)`` gives the optimizer whose state is measured.

Example::

    >>> from graphtool.capture.user.script import load_model
    >>> from graphtool.capture.tracer import trace_model
    >>> with Fsdp2Session(world_size=8) as fsdp:
    ...     cap = trace_model(load_model("tests/fixtures/fsdp2/blocks.py"), wrapper=fsdp, backend="aot_eager")
    ...     run = fsdp.result(cap)
    >>> [u.module for u in run.units], len(cap.regions)
    (['', 'layers.0', 'layers.1', 'layers.2', 'layers.3'], 2)
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional

from graphtool.capture import compat
from graphtool.capture.distributed.ddp import GroupSession, check_world_size
from graphtool.errors import UsageError

#: the optional factory of the optimizer whose state is measured: ``get_optimizer(model)``
OPTIMIZER_FACTORY = "get_optimizer"
CONVENTION = "fully_shard(each ModuleList block), fully_shard(model), torch.compile(model)"
AS_GIVEN = "the script's get_distributed_model (sharded by the script)"


@dataclass(frozen=True)
class ShardedParam:
    """One parameter under FSDP2: its full shape, rank 0's padded shard and its element size."""

    name: str
    shape: tuple[int, ...]
    padded_shard: tuple[int, ...]
    element_size: int
    dtype: str


@dataclass(frozen=True)
class Unit:
    """One ``fully_shard``ed module (an FSDP unit): its parameters, those that no other unit holds."""

    module: str  # "" for the root
    params: tuple[ShardedParam, ...]


@dataclass(frozen=True)
class EagerCollective:
    """A collective FSDP2 ran in its hooks, outside every compiled graph, during the first step."""

    op: str  # "all_gather_single", "reduce_scatter_single"...
    unit: Optional[str]
    output_bytes: int  # on this rank
    input_bytes: int


@dataclass(frozen=True)
class Fsdp2Run:
    wrapper: str  # CONVENTION or AS_GIVEN
    world_size: int
    units: tuple[Unit, ...]
    collectives: tuple[EagerCollective, ...]
    skip_fsdp_hooks: bool
    optimizer: Optional[str]  # the optimizer's class name, when the script gave one
    optimizer_state: tuple[tuple[str, str, tuple, int], ...]  # (param, state key, shape, bytes) on rank 0
    compiled_by_script: tuple[str, ...] = ()  # modules the script compiled itself (``module.compile()``)
    group_sizes: dict = field(default_factory=dict)  # process group name -> ranks (collectives in graphs)


class Fsdp2Session(GroupSession):
    """A fake process group of ``world_size`` ranks (this process is rank 0), FSDP2 applied by
    :meth:`wrap`, and a record of the collectives FSDP2 runs.

    Open it before the script is loaded: a script that starts its own process group then fails at
    its own line instead of waiting for ranks that never come."""

    def __init__(self, *, world_size: int = 2):
        self.world_size = check_world_size(world_size)
        self.records: list = []
        self.input_names: dict[str, tuple[str, str]] = {}
        self.from_factory = False
        self.wrapper = CONVENTION
        self.model: Any = None
        self.optimizer: Any = None
        self._units: dict[int, str] = {}  # id(module) -> its name, for each fully_shard'ed module
        self._groups: dict[int, str] = {}  # id(FSDPParamGroup) -> its module's name
        self._stack: Any = None
        self._backend: Any = None
        #: modules the script compiled itself (``block.compile()``), recompiled with graphtool's backend
        self.recompiled: list[str] = []
        #: the steps ran on the meta stand-in (:func:`graphtool.capture.compat.fsdp2_on_meta`)
        self.on_meta = False
        self._record_steps: list[int] = []  # the step each of ``records`` ran in

    def use_backend(self, backend: Any) -> None:
        """The backend that records graphs: a module the script compiled itself compiles with it instead."""
        self._backend = backend

    option = "--fsdp2"

    def _record(self, stack: Any) -> None:
        stack.enter_context(compat.recording_fsdp_collectives(self.records, self._unit_of))

    def wrap(self, compiled: Any, spec: Any = None) -> Any:
        """``fully_shard`` the blocks and the root of the model ``compiled`` wraps (in place: the
        compiled model then runs the sharded one), unless the script's factory sharded it."""
        from torch.distributed.fsdp import FSDPModule, fully_shard
        from torch.nn.parallel import DistributedDataParallel as DDP

        inner = getattr(compiled, "_orig_mod", compiled)
        where = f"{spec.location}: " if spec is not None and getattr(spec, "location", None) else ""
        if isinstance(inner, DDP):
            raise UsageError(f"{where}--fsdp2: the script's model is a DistributedDataParallel",
                             hint="return the bare model: graphtool applies fully_shard itself (or use --ddp)")
        if not hasattr(inner, "named_modules"):
            raise UsageError(f"{where}--fsdp2 needs an nn.Module (fully_shard shards a module's parameters)")
        sharded = [m for m in inner.modules() if isinstance(m, FSDPModule)]
        if sharded:
            self.wrapper = AS_GIVEN if self.from_factory else "the script's own fully_shard"
        else:
            import torch.nn as nn

            blocks = [child for m in inner.modules() if isinstance(m, nn.ModuleList) for child in m]
            for block in blocks:
                fully_shard(block)
            fully_shard(inner)
        if any(p.device.type == "meta" for p in inner.parameters()):
            # the accelerator stand-in (``cudagraphs --fsdp2``): FSDP2's steps on meta parameters
            self._stack.enter_context(compat.fsdp2_on_meta(inner))
            self.on_meta = True
        names = {id(m): name for name, m in inner.named_modules()}
        self._units = {id(m): names.get(id(m), "?") for m in inner.modules() if isinstance(m, FSDPModule)}
        self._groups = {id(g): self._units[id(m)] for m in inner.modules() if id(m) in self._units
                        for g in [compat.fsdp_param_group(m)] if g is not None}
        self._recompile(inner, names)
        self._name_inputs(inner, names)
        self.model = inner
        self.optimizer = self._optimizer(inner, spec)
        return compiled

    def _name_inputs(self, model: Any, names: dict[int, str]) -> None:
        """Name the graphs' parameter inputs. FSDP2 swaps in unsharded parameters (new tensors) while
        a unit runs, so they are found by dynamo's placeholder name instead, relative to the unit's
        ``self`` (``l_self_modules_l1_parameters_weight_``); a graph that serves several blocks names
        them with ``*`` (``layers.*.l1.weight``)."""
        found: dict[str, set[str]] = {}
        for m in model.modules():
            if id(m) not in self._units:
                continue
            prefix = names.get(id(m), "")
            for rel, _p in m.named_parameters():
                *mods, leaf = rel.split(".")
                node = "l_self" + "".join(f"_modules_{part}" for part in mods) + f"_parameters_{leaf}_"
                found.setdefault(node, set()).add(f"{prefix}.{rel}" if prefix else rel)
        for node, full in found.items():
            self.input_names.setdefault(node, ("parameter", _common(sorted(full))))
        # the tracer named the parameters by id before fully_shard replaced them: those tensors are
        # gone, and a new tensor (an unsharded parameter) may reuse an id
        by_id = getattr(self._backend, "names", None)
        if isinstance(by_id, dict):
            for key in [k for k, (kind, _n) in by_id.items() if kind == "parameter"]:
                del by_id[key]

    def _recompile(self, model: Any, names: dict[int, str]) -> None:
        """``module.compile()`` keeps ``torch.compile(module._call_impl, **kwargs)`` in
        ``_compiled_call_impl``: the same call with graphtool's backend, so its graphs are recorded."""
        if self._backend is None:
            return
        for m in model.modules():
            if compat.recompile_module(m, self._backend):
                self.recompiled.append(names.get(id(m), "?"))

    def _optimizer(self, model: Any, spec: Any) -> Any:
        """The script's ``get_optimizer(model)``, called on the sharded model (its state is sharded too)."""
        from graphtool.capture.memory.optimizer_state import optimizer_factory

        factory = optimizer_factory(spec)
        if factory is None:
            return None
        from graphtool.capture.user.boundary import running_user_code

        with running_user_code(f"calling {OPTIMIZER_FACTORY}(model)", where=str(spec.path)):
            return factory(model)

    def _unit_of(self, group: Any) -> Optional[str]:
        # called once per recorded collective: note the loop's step it ran in (the backend's call logger)
        self._record_steps.append(getattr(getattr(self._backend, "calls", None), "step", 1))
        return self._groups.get(id(group))

    def result(self, capture: Any = None) -> Fsdp2Run:
        """The units, the collectives of the step and the optimizer's state, as plain values."""
        units = []
        for m in self.model.modules() if self.model is not None else ():
            if id(m) not in self._units:
                continue
            group = compat.fsdp_param_group(m)
            params = tuple(ShardedParam(fqn, full, padded, _element_size(dtype), str(dtype).replace("torch.", ""))
                           for fqn, full, _local, padded, dtype in (compat.fsdp_param_sizes(group) if group else ()))
            units.append(Unit(self._units[id(m)], params))
        # the first step's: every step runs the same collectives (``--steps`` runs several)
        collectives = tuple(EagerCollective(op, unit, out_b, in_b)
                            for (op, out_b, in_b, unit), step in zip(self.records, self._record_steps) if step == 1)
        state = ()
        if self.optimizer is not None and any(p.grad is not None for p in self.model.parameters()):
            # after the traced backward: its gradients are the step's (none in --inference)
            self.optimizer.step()
            state = tuple(_optimizer_state(self.model, self.optimizer))
        return Fsdp2Run(self.wrapper, self.world_size, tuple(units), collectives, compat.skip_fsdp_hooks(),
                        type(self.optimizer).__name__ if self.optimizer is not None else None, state,
                        tuple(self.recompiled), getattr(self, "group_sizes", None) or compat.process_group_sizes())


def _common(names: list[str]) -> str:
    """One name for parameters that one graph serves: the parts they share, ``*`` where they differ.

    >>> _common(["layers.0.l1.weight", "layers.3.l1.weight"])
    'layers.*.l1.weight'
    """
    parts = [n.split(".") for n in names]
    if len(names) == 1 or len({len(p) for p in parts}) != 1:
        return names[0] if len(names) == 1 else " | ".join(names)
    return ".".join(col[0] if len(set(col)) == 1 else "*" for col in zip(*parts))


def _element_size(dtype: Any) -> int:
    import torch

    return torch.empty((), dtype=dtype).element_size()


def _optimizer_state(model: Any, optimizer: Any):
    """``(param, key, local shape, bytes)`` of every tensor in the optimizer's state, on this rank."""
    names = {id(p): n for n, p in model.named_parameters()}
    for p, state in optimizer.state.items():
        for key, value in sorted(state.items()):
            local = value.to_local() if hasattr(value, "to_local") else value
            if hasattr(local, "element_size"):
                yield names.get(id(p), "?"), str(key), tuple(local.shape), int(local.numel() * local.element_size())
