"""Run a model's step under DDP the way a multi-GPU launch would, on one CPU process.

``DDP(torch.compile(model))`` hands dynamo's graph to ``DDPOptimizer`` (``optimize_ddp``), which
splits it where DDP's gradient buckets end, so one graph becomes several. Where the split falls
depends on the bucket cap and on the parameters' sizes in graph order, never on the world size
(torch/_dynamo/backends/distributed.py: ``compile_fn`` counts ``untyped_storage().nbytes()`` of
each parameter against ``bucket_bytes_cap``), and a rank compiles what its own code and shapes
give it. So graphtool needs no GPU and no other process: torch's fake process group makes one
process any rank of any world size (``dist.get_world_size()`` is the launch's), DDP's forward runs
in it and splits as it does under gloo (measured: the same graphs as a one-process gloo group), and
:mod:`graphtool.capture.distributed.ranks` runs the other ranks that could differ. A test compares them with
real gloo runs of 2 and 4 processes.

Example::

    >>> from graphtool.capture.user.script import load_model
    >>> from graphtool.capture.tracer import trace_model
    >>> with DdpSession(world_size=8, bucket_cap_mb=1) as ddp:
    ...     cap = trace_model(load_model("examples/mlp.py"), wrapper=ddp)
    ...     run = ddp.result(cap)
    >>> [len(f.buckets) for f in run.frames]
    [1]
"""

from __future__ import annotations

import contextlib
import math
import os
from dataclasses import dataclass, field
from typing import Any, Optional

from graphtool.capture import compat
from graphtool.errors import UsageError

#: DDP's own default ``bucket_cap_mb``
DEFAULT_BUCKET_CAP_MB = 25.0
#: the caps the report compares (with the one asked for)
COMPARED_CAPS_MB = (1.0, 5.0, 10.0, 25.0, 50.0, 100.0)
_MB = 1024 * 1024


@dataclass(frozen=True)
class BucketSplit:
    """One graph DDPOptimizer cut out of a dynamo graph: the parameters whose gradients form its
    bucket, their bytes, and the stack trace of its first node (where the split falls)."""

    index: int
    params: tuple[str, ...]
    bytes: int
    stack_trace: Optional[str]
    module: Optional[str] = None  # the module its first node belongs to (``layers.3``)


@dataclass(frozen=True)
class SplitFrame:
    """One dynamo graph under DDP: its buckets (one compiled graph each), the first of graphtool's
    regions it became, and how many graphs each compared bucket cap would give."""

    buckets: tuple[BucketSplit, ...]
    first_region: int
    graphs_at: tuple[tuple[float, int], ...]


#: the factory a script may give for ``--ddp``: ``get_distributed_model(world_size)`` returning
#: ``(model, example_inputs[, example_kwargs])``, the model bare or ``DDP(model)``
DISTRIBUTED_FACTORY = "get_distributed_model"
PLAIN = "DDP(torch.compile(model))"
#: the first sentence of the error DDP's reducer raises at the step after one that left a parameter
#: without gradient (``find_unused_parameters=False``, torch/csrc/distributed/c10d/reducer.cpp)
UNFINISHED_REDUCTION = "Expected to have finished reduction in the prior iteration before starting a new one."


class UnfinishedReduction(RuntimeError):
    """What DDP's reducer raises, raised by the stand-in in its place (meta holds no reducer data)."""

    stands_in_for_torch = True  # not a bug in graphtool
    shown_as = "RuntimeError"  # the type a real rank's reducer raises: messages name it as torch does


COMPILED_DDP = "torch.compile(DDP(model))"


@dataclass(frozen=True)
class DdpRun:
    wrapper: str  # PLAIN, or COMPILED_DDP when the script's factory returned DDP(model)
    world_size: int
    bucket_cap_mb: float
    first_bucket_bytes: int
    frames: tuple[SplitFrame, ...]
    #: parameters that require grad and got none in the steps run (DDP needs find_unused_parameters=True)
    unused_params: tuple[str, ...] = ()
    find_unused_parameters: bool = False
    group_sizes: dict = field(default_factory=dict)  # process group name -> ranks (collectives in graphs)


def check_world_size(world_size: int) -> int:
    if world_size < 1:
        raise UsageError(f"--world-size {world_size}: a process group needs at least one rank",
                         hint="pass the number of GPUs the launch will use, e.g. --world-size 8")
    return world_size


def check_bucket_cap(bucket_cap_mb: float) -> float:
    """A cap torch.compile accepts: DDPOptimizer asserts its first bucket (1 MiB) fits in the cap."""
    first = compat.ddp_first_bucket_bytes()
    if not math.isfinite(bucket_cap_mb) or bucket_cap_mb * _MB < first:
        raise UsageError(
            f"--bucket-cap-mb {bucket_cap_mb:g}: DDP(torch.compile(model), bucket_cap_mb={bucket_cap_mb:g}) fails in "
            f"torch's DDPOptimizer (\"First bucket should be smaller/equal to other buckets\"): its first bucket is "
            f"{first / _MB:g} MB whatever the cap",
            hint=f"use a cap of at least {first / _MB:g} MB",
        )
    return bucket_cap_mb


class GroupSession:
    """What every wrapper launch (``--ddp``, ``--fsdp2``) is: this process as rank ``rank`` of ``world_size`` in torch's
    fake process group, opened before the script is loaded and destroyed on every way out, with the wrapper's own
    recording inside it. A wrapper says its option (``--ddp``), what it records (:meth:`_record`), how it wraps the
    compiled model (:meth:`wrap`) and what it found (:meth:`result`); the commands call only these."""

    option = ""
    rank = 0
    world_size = 2

    def entry(self, target: str, entry: str | None) -> tuple[str | None, tuple]:
        """The factory to call and its arguments: the script's ``get_distributed_model(world_size)``
        when it defines one and no other entry was asked for (found without importing the script)."""
        return factory_entry(self, target, entry)

    def __enter__(self):
        check_no_group(self.option)
        stack = contextlib.ExitStack()
        # torch's fake group: the script sees the launch's world size and this rank
        compat.init_fake_process_group(self.world_size, rank=self.rank)
        stack.callback(_destroy_group)
        self._record(stack)
        self._stack = stack
        return self

    def __exit__(self, *exc) -> None:
        self.group_sizes = compat.process_group_sizes()  # the group goes with the stack; result() may come after
        self._stack.close()

    def _record(self, stack: contextlib.ExitStack) -> None:
        raise NotImplementedError

    def use_backend(self, backend: Any) -> None:
        """The backend that records graphs, for a wrapper that must compile with it itself."""

    def wrap(self, compiled: Any, spec: Any = None) -> Any:
        raise NotImplementedError

    def result(self, capture: Any = None) -> Any:
        raise NotImplementedError


class Alone(GroupSession):
    """The model alone: no process group, the compiled model run as it is: where a caller that takes any session
    (lint's child) has no wrapper."""

    def entry(self, target: str, entry: str | None) -> tuple[str | None, tuple]:
        return entry, ()

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        return None

    def wrap(self, compiled: Any, spec: Any = None) -> Any:
        return compiled

    def result(self, capture: Any = None) -> Any:
        return None


class DdpSession(GroupSession):
    """A fake process group (this process is rank ``rank`` of ``world_size``), dynamo's DDPOptimizer on, and a record of each split it makes.

    Open it before the script is loaded: a script that starts its own process group then fails at
    its own line instead of waiting for ranks that never come."""

    def __init__(self, *, world_size: int = 2, bucket_cap_mb: float = DEFAULT_BUCKET_CAP_MB,
                 find_unused_parameters: bool = False, rank: int = 0, quiet: bool = True):
        self.world_size = check_world_size(world_size)
        self.quiet = quiet  # False under --debug: torch's own warnings about the stand-in kept
        self.find_unused_parameters = find_unused_parameters
        self.rank = rank
        self.bucket_cap_mb = check_bucket_cap(bucket_cap_mb)
        self.records: list = []
        #: dynamo's placeholder name -> (kind, name): the split graphs' inputs reach the backend fake
        self.input_names: dict[str, tuple[str, str]] = {}
        self._names: dict[int, tuple[str, str]] = {}
        self._stack: Any = None
        self.from_factory = False  # the model came from the script's get_distributed_model(world_size)
        self.wrapper = PLAIN
        self._grad_params: dict[int, str] = {}  # id -> name of each parameter that requires grad
        self._got_grad: set[int] = set()  # the ids of those a backward gave a gradient
        self._forwards = 0
        self.ddp: Any = None  # the DistributedDataParallel the model runs in (torch's bucket figures)

    option = "--ddp"

    def _record(self, stack: contextlib.ExitStack) -> None:
        # DDP splits in the fake group as under gloo: dynamo's DDPOptimizer on, each split recorded
        stack.enter_context(compat.optimize_ddp_on())
        stack.enter_context(compat.recording_ddp_splits(self.records, before=self._name_inputs))

    def wrap(self, compiled: Any, spec: Any = None) -> Any:
        """``DDP(torch.compile(model), bucket_cap_mb=...)``: how a training script writes it."""
        from torch.nn.parallel import DistributedDataParallel as DDP

        inner = getattr(compiled, "_orig_mod", compiled)
        on_meta = any(p.device.type == "meta" for p in getattr(inner, "parameters", lambda: [])())
        self._watch_grads(inner)
        if isinstance(inner, DDP) and self.from_factory and not hasattr(inner.module, "_orig_mod"):
            if on_meta:
                raise UsageError("--ddp on the accelerator stand-in: the script's get_distributed_model returned "
                                 "DDP(model), whose gradient buckets live on the CPU",
                                 hint="return the bare model (graphtool wraps it as DDP(torch.compile(model)))")
            # the script's own wrapping, compiled as such a script compiles it
            from graphtool.capture.tracer import tensor_names

            self._names = tensor_names(spec) if spec is not None else {}
            self.wrapper = COMPILED_DDP
            self.bucket_cap_mb = inner.bucket_bytes_cap / _MB  # the script's own DDP's cap
            self.find_unused_parameters = bool(inner.find_unused_parameters)
            self.ddp = inner
            _no_allreduce(inner)
            return compiled
        if isinstance(inner, DDP):
            where = f"{spec.location}: " if spec is not None else ""
            raise UsageError(
                f"{where}--ddp: the script's model is already a DistributedDataParallel",
                hint="return the bare model (graphtool wraps it as DDP(torch.compile(model))), or give "
                     f"{DISTRIBUTED_FACTORY}(world_size) returning DDP(model) (traced as torch.compile(DDP(model)))",
            )
        from graphtool.capture.tracer import tensor_names

        self._names = tensor_names(spec) if spec is not None else {}
        if on_meta:  # the accelerator stand-in: no value to broadcast, no allreduce gloo could run; the
            # reducer's search for unused parameters copies data, so the session answers for it (it moves no split)
            return compat.ddp_on_meta(DDP(compiled, bucket_cap_mb=self.bucket_cap_mb, init_sync=False),
                                      before_forward=self._prior_reduction_ended, quiet=self.quiet)
        self.ddp = _no_allreduce(DDP(compiled, bucket_cap_mb=self.bucket_cap_mb,
                                     find_unused_parameters=self.find_unused_parameters))
        return self.ddp

    def _watch_grads(self, module: Any) -> None:
        """Note each parameter a backward gives a gradient (a hook after its accumulation)."""
        if not hasattr(module, "named_parameters"):
            return
        for name, p in module.named_parameters():
            if p.requires_grad and id(p) not in self._grad_params:
                self._grad_params[id(p)] = name
                p.register_post_accumulate_grad_hook(lambda q: self._got_grad.add(id(q)))

    def unused(self) -> tuple[str, ...]:
        """The parameters that require grad and got no gradient in the steps run so far."""
        return tuple(n for i, n in self._grad_params.items() if i not in self._got_grad)

    def _prior_reduction_ended(self) -> None:
        """On the stand-in (no reducer data to check): what DDP's reducer raises at the next step's
        forward when a parameter got no gradient and ``find_unused_parameters`` is off."""
        self._forwards += 1
        if self._forwards > 1 and not self.find_unused_parameters and self.unused():
            raise UnfinishedReduction(UNFINISHED_REDUCTION + f" (graphtool's stand-in: parameters that got no gradient: "
                                      f"{', '.join(self.unused())})")

    def _name_inputs(self, gm: Any, example_inputs: list) -> None:
        nodes = [n for n in gm.graph.nodes if n.op == "placeholder"]
        for node, t in zip(nodes, example_inputs):
            if id(t) in self._names:
                self.input_names[node.name] = self._names[id(t)]

    def result(self, capture: Any) -> DdpRun:
        """The splits of this session's trace, matched to ``capture``'s regions in compile order."""
        names = _param_names(capture.spec.model)
        frames, region = [], 0
        for opt, gm, example_inputs in list(self.records):
            by_target = _placeholder_names(gm, example_inputs, names)
            buckets = tuple(_bucket(i, b, by_target) for i, b in enumerate(opt.buckets))
            caps = sorted({*COMPARED_CAPS_MB, self.bucket_cap_mb})
            graphs_at = tuple((cap, _graphs_at(gm, example_inputs, cap, len(buckets), self.bucket_cap_mb)) for cap in caps)
            frames.append(SplitFrame(buckets, region, graphs_at))
            region += len(buckets)
        return DdpRun(self.wrapper, self.world_size, self.bucket_cap_mb, compat.ddp_first_bucket_bytes(), tuple(frames),
                      self.unused(), self.find_unused_parameters, getattr(self, "group_sizes", None) or compat.process_group_sizes())


def factory_entry(session: Any, target: Any, entry: str | None) -> tuple[str | None, tuple]:
    """The factory a wrapper session (``--ddp``, ``--fsdp2``) calls and its arguments: the script's
    ``get_distributed_model(world_size)`` when it defines one and no other entry was asked for (found
    without importing the script); ``session.from_factory`` says so."""
    from graphtool.capture.user.script import split_target

    if not isinstance(target, (str, os.PathLike)):  # a model object (graphtool.api): no script to read
        return entry, ()
    path, inline = split_target(os.fspath(target))
    if entry or inline or not _defines(path, DISTRIBUTED_FACTORY):
        return entry, ()
    session.from_factory = True
    return DISTRIBUTED_FACTORY, (session.world_size,)


def check_no_group(option: str) -> None:
    """Before a wrapper session starts its process group: torch.distributed is there, and no group is yet."""
    import torch.distributed as dist

    if not dist.is_available():
        raise UsageError(f"this torch was built without torch.distributed: {option} cannot run")
    if dist.is_initialized():
        raise UsageError(f"a default process group already exists in this process: {option} starts its own")


def _defines(path: str, name: str) -> bool:
    """Whether the script defines a top-level function ``name`` (read, not imported)."""
    import ast

    try:
        tree = ast.parse(open(path, "rb").read())
    except (OSError, SyntaxError, ValueError):
        return False  # importing it later reports the problem with the script's own line
    return any(isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name == name for n in tree.body)


def _no_allreduce(ddp: Any) -> Any:
    """The fake group's allreduce yields no tensor and DDP's reducer asserts on it: a hook that hands
    each bucket back as it is (the allreduce runs outside every graph, so the graphs stay the same)."""
    from torch.distributed.algorithms.ddp_comm_hooks.debugging_hooks import noop_hook

    with contextlib.suppress(RuntimeError):  # the script registered its own hook: that one runs
        ddp.register_comm_hook(None, noop_hook)
    return ddp


def _destroy_group() -> None:
    import torch.distributed as dist

    if dist.is_initialized():
        dist.destroy_process_group()


def _param_names(model: Any) -> dict[int, str]:
    if not hasattr(model, "named_parameters"):
        return {}
    return {id(p): fqn for fqn, p in reversed(list(model.named_parameters(remove_duplicate=False)))}


def _placeholder_names(gm: Any, example_inputs: list, names: dict[int, str]) -> dict[str, str]:
    """Dynamo's placeholder name -> the parameter's name in the user's model (placeholders and
    example inputs come in the same order, and the inputs are the model's own tensors)."""
    nodes = [n for n in gm.graph.nodes if n.op == "placeholder"]
    return {str(n.target): names[id(t)] for n, t in zip(nodes, example_inputs) if id(t) in names}


def _bucket(index: int, bucket: Any, by_target: dict[str, str]) -> BucketSplit:
    params = tuple(by_target.get(name, name) for name in bucket.params)
    # the bucket's nodes are listed last to first: its first computing node in program order is
    # where the split falls
    nodes = [n for n in reversed(bucket.nodes) if n.op not in ("placeholder", "get_attr")] or list(reversed(bucket.nodes))
    traced = next((n.meta["stack_trace"] for n in nodes if n.meta.get("stack_trace")), None)
    return BucketSplit(index, params, int(bucket.size), traced, _module_path(nodes[0]) if nodes else None)


def _module_path(node: Any) -> str | None:
    """The user's module the node belongs to (``layers.3``), from dynamo's ``nn_module_stack``."""
    stack = node.meta.get("nn_module_stack") or {}
    if not stack:
        return None
    path = str(list(stack.values())[-1][0])
    for prefix in ("L['fn']", "L['self']", "L['args'][0]"):  # the last: a decorated forward (transformers')
        if path.startswith(prefix):
            path = path[len(prefix):].lstrip(".")
            break
    return path or None


def _graphs_at(gm: Any, example_inputs: list, cap_mb: float, asked_count: int, asked_mb: float) -> int:
    if cap_mb == asked_mb:
        return asked_count
    return len(compat.ddp_buckets_at(gm, example_inputs, int(cap_mb * _MB)))
