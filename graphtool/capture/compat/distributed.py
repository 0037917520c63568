"""``torch.distributed`` under torch.compile (issue 26): dynamo's DDPOptimizer (its buckets, chosen
again at any cap, and its splits recorded), DDP and FSDP2 run on the meta stand-in (a comm hook, the reducer's
bucket rebuild and the logger's timer warning left out; FSDP2's buffers and device handle on meta), a fake
process group of any world size in one process, FSDP2's parameter groups and shard sizes, the collectives its
hooks run, DDP's own bucket figures, and the live process groups' sizes."""

from __future__ import annotations

import contextlib
import importlib
from typing import Any

from graphtool.capture.compat._lookup import _missing, _require
from graphtool.capture.compat.dynamo import dynamo_config_patch

# --- DDP under torch.compile (issue 26): dynamo's DDPOptimizer -------------------------------------


class _EnoughBuckets(Exception):
    """Raised by a stand-in backend once DDPOptimizer has chosen its buckets: nothing is compiled."""


def ddp_optimizer_class() -> Any:
    """``torch._dynamo.backends.distributed.DDPOptimizer``: the pass that splits a dynamo graph at
    DDP's bucket boundaries (``optimize_ddp="ddp_optimizer"``, the default). graphtool reads its
    ``compile_fn`` and the ``buckets`` it stashes (``size``, ``params``, ``param_ids``, ``nodes``)."""
    cls = _require("torch._dynamo.backends.distributed", "DDPOptimizer")
    if not callable(getattr(cls, "compile_fn", None)):
        raise _missing("torch._dynamo.backends.distributed.DDPOptimizer.compile_fn")
    return cls


def ddp_first_bucket_bytes() -> int:
    """``torch.distributed._DEFAULT_FIRST_BUCKET_BYTES``: the first bucket's cap dynamo's DDPOptimizer
    uses whatever DDP's ``bucket_cap_mb`` (convert_frame builds it without ``first_bucket_cap``)."""
    return int(_require("torch.distributed", "_DEFAULT_FIRST_BUCKET_BYTES"))


def optimize_ddp_on():
    """dynamo's ``optimize_ddp`` set to ``"ddp_optimizer"`` (the default; a script may have changed it)."""
    return dynamo_config_patch({"optimize_ddp": "ddp_optimizer"})


@contextlib.contextmanager
def recording_ddp_splits(records: list, before: Any = None):
    """While open, every DDPOptimizer split appends ``(optimizer, gm, example_inputs)`` to ``records``
    (after torch chose the buckets, whether or not compiling the pieces then succeeded);
    ``before(gm, example_inputs)`` runs first."""
    cls = ddp_optimizer_class()
    original = cls.compile_fn

    def compile_fn(self, gm, example_inputs, **configs):
        if before is not None:
            before(gm, example_inputs)
        try:
            return original(self, gm, example_inputs, **configs)
        finally:
            if getattr(self, "buckets", None) is not None:
                records.append((self, gm, list(example_inputs)))

    cls.compile_fn = compile_fn
    cls._graphtool_original_compile_fn = original
    try:
        yield records
    finally:
        cls.compile_fn = original
        del cls._graphtool_original_compile_fn


def ddp_buckets_at(gm: Any, example_inputs: list, bucket_bytes: int) -> list:
    """The buckets torch's own DDPOptimizer chooses for ``gm`` at a bucket cap of ``bucket_bytes``,
    without compiling anything: torch logs the buckets (``pretty_print_buckets``) right after it
    stashes them, and graphtool stops it there (else at its backend, after the split)."""
    module = importlib.import_module("torch._dynamo.backends.distributed")
    cls = ddp_optimizer_class()

    def stop(*_args, **_kw):
        raise _EnoughBuckets

    opt = cls(bucket_bytes_cap=bucket_bytes, backend_compile_fn=stop)
    original_log = getattr(module, "pretty_print_buckets", None)
    if original_log is not None:
        module.pretty_print_buckets = stop
    try:
        cls.__dict__.get("_graphtool_original_compile_fn", cls.compile_fn)(opt, gm, example_inputs)
    except _EnoughBuckets:
        pass
    finally:
        if original_log is not None:
            module.pretty_print_buckets = original_log
    return list(opt.buckets)


# --- FSDP2 under torch.compile (issue 26): fully_shard in a fake process group ----------------------


def fake_store_class() -> Any:
    """``torch.testing._internal.distributed.fake_pg.FakeStore``: with it, ``init_process_group("fake")``
    makes a group of any world size in one process whose collectives do nothing (rank 0's view)."""
    return _require("torch.testing._internal.distributed.fake_pg", "FakeStore")


def init_fake_process_group(world_size: int, rank: int = 0) -> None:
    """The default process group as ``rank`` of ``world_size`` ranks, none of which exists: one process
    stands for any rank of any world size (``--ddp``, ``--fsdp2``). Its collectives return without
    communicating (DDP's allreduce hook then yields None: give DDP a comm hook)."""
    import torch.distributed as dist

    dist.init_process_group("fake", store=fake_store_class()(), rank=rank, world_size=world_size)


def fsdp_param_group(module: Any) -> Any:
    """The ``FSDPParamGroup`` that ``fully_shard(module)`` made (``None``: the module manages no
    parameter of its own), via ``FSDPModule._get_fsdp_state()._fsdp_param_group``."""
    state = getattr(module, "_get_fsdp_state", None)
    if state is None:
        raise _missing("FSDPModule._get_fsdp_state")
    return getattr(state(), "_fsdp_param_group", None)


def fsdp_param_sizes(group: Any) -> list[tuple[str, tuple, tuple, tuple, Any]]:
    """Each parameter of an ``FSDPParamGroup`` as ``(fqn, full shape, local shard shape on this
    rank, padded shard shape, dtype)``: FSDP2 pads dim 0 to a multiple of the world size and keeps the
    padded shard (``padded_sharded_param_size``). The names are set at the root's lazy init (its first forward)."""
    out = []
    for fp in group.fsdp_params:
        for attr in ("_param_fqn", "_orig_size", "sharded_size", "padded_sharded_param_size"):
            if not hasattr(fp, attr):
                raise _missing(f"FSDPParam.{attr}")
        out.append((str(fp._param_fqn), tuple(fp._orig_size), tuple(fp.sharded_size),
                    tuple(fp.padded_sharded_param_size), fp.sharded_param.dtype))
    return out


def skip_fsdp_hooks() -> bool:
    """Whether FSDP2's hooks, and their collectives, run eagerly outside the graphs: dynamo's
    ``skip_fsdp_hooks`` where a release has it (True by default; False traced them, "traceable
    FSDP2"); torch 2.13 and 2.14 have no such flag and always run them eagerly (True)."""
    return bool(getattr(_require("torch._dynamo", "config"), "skip_fsdp_hooks", True))


@contextlib.contextmanager
def fsdp2_on_meta(model: Any):
    """While open, ``model`` (``fully_shard``ed over meta parameters, FSDP2's way of deferring
    initialisation) runs its FSDP2 steps on meta, the accelerator stand-in: each ``FSDPParamGroup``
    and ``FSDPParam`` allocates its all-gather and reduce-scatter buffers on meta (``.device``; the
    mesh stays the fake group's cpu one, whose stream and event stubs FSDP2 waits on), the all-gather's
    stream handle for meta is the cpu one (``_fsdp_collectives._get_device_handle``), and the lazy
    init's "parameters should be materialized from meta device" check says yes. The fake group's
    collectives touch no data, so nothing else needs a value."""
    import torch

    group_cls = _require("torch.distributed.fsdp._fully_shard._fsdp_param_group", "FSDPParamGroup")
    collectives = importlib.import_module("torch.distributed.fsdp._fully_shard._fsdp_collectives")
    handle = getattr(collectives, "_get_device_handle", None)
    check = getattr(group_cls, "_validate_no_meta_params", None)
    if handle is None:
        raise _missing("torch.distributed.fsdp._fully_shard._fsdp_collectives._get_device_handle")
    if check is None:
        raise _missing("FSDPParamGroup._validate_no_meta_params")
    meta = torch.device("meta")
    for module in model.modules():
        group = fsdp_param_group(module) if hasattr(module, "_get_fsdp_state") else None
        if group is None:
            continue
        if not hasattr(group, "device") or not all(hasattr(fp, "device") for fp in group.fsdp_params):
            raise _missing("FSDPParamGroup.device / FSDPParam.device")
        group.device = meta
        for fp in group.fsdp_params:
            fp.device = meta

    def handle_for(device_type: str = "cuda") -> Any:
        return torch.cpu if device_type == "meta" else handle(device_type)

    # 2.15: foreach_reduce records the reduce-scatter's output buffer on its stream through a custom op
    # that reads ``stream.stream_id``, which the cpu stream stub standing for meta's lacks; it skips cpu
    # buffers itself (no device free to order), and a meta buffer has none either
    record = getattr(collectives, "record_grad_output_stream", None)

    def record_for(buffer: Any, stream: Any) -> None:
        if buffer.device.type != "meta":
            record(buffer, stream)

    collectives._get_device_handle = handle_for
    group_cls._validate_no_meta_params = lambda self: None
    if record is not None:
        collectives.record_grad_output_stream = record_for
    try:
        yield model
    finally:
        collectives._get_device_handle = handle
        group_cls._validate_no_meta_params = check
        if record is not None:
            collectives.record_grad_output_stream = record


#: the torch.distributed functions FSDP2's hooks call for its collectives (2.13: ``all_gather_single``,
#: ``reduce_scatter_single``; older releases ``all_gather_into_tensor``, ``reduce_scatter_tensor``;
#: HSDP adds ``all_reduce``)
FSDP_COLLECTIVES = ("all_gather_single", "all_gather_into_tensor", "reduce_scatter_single", "reduce_scatter_tensor",
                    "all_reduce")


@contextlib.contextmanager
def recording_fsdp_collectives(records: list, name_of: Any):
    """While open, each collective FSDP2 runs eagerly appends ``(op, output bytes, input bytes, unit)``
    to ``records``: ``unit`` is ``name_of(group)`` for the ``FSDPParamGroup`` whose ``unshard`` or
    ``post_backward`` issued it (None outside them). The public ``torch.distributed`` functions are
    wrapped (a dispatch mode would see the c10d ops, but dynamo compiles nothing under one); a call
    made by another wrapped call is not counted twice."""
    import torch.distributed as dist

    group_cls = _require("torch.distributed.fsdp._fully_shard._fsdp_param_group", "FSDPParamGroup")
    current: list = []
    depth = [0]
    patched: list = []
    for method in ("unshard", "post_backward"):
        original = getattr(group_cls, method, None)
        if original is None:
            raise _missing(f"FSDPParamGroup.{method}")

        def in_group(self, *args, __original=original, **kwargs):
            current.append(self)
            try:
                return __original(self, *args, **kwargs)
            finally:
                current.pop()

        patched.append((group_cls, method, original))
        setattr(group_cls, method, in_group)
    for name in FSDP_COLLECTIVES:
        original = getattr(dist, name, None)
        if original is None:
            continue

        def counted(*args, __original=original, __name=name, **kwargs):
            if depth[0] == 0 and current:
                tensors = [a for a in (*args, *kwargs.values()) if hasattr(a, "element_size")]
                sizes = [int(t.numel() * t.element_size()) for t in tensors]
                records.append((__name, sizes[0] if sizes else 0, sizes[1] if len(sizes) > 1 else 0,
                                name_of(current[-1])))
            depth[0] += 1
            try:
                return __original(*args, **kwargs)
            finally:
                depth[0] -= 1

        patched.append((dist, name, original))
        setattr(dist, name, counted)
    try:
        yield records
    finally:
        for owner, name, original in reversed(patched):
            setattr(owner, name, original)


class _ReducerOnMeta:
    """DDP's reducer, but ``_rebuild_buckets`` says no: after the first step the C++ reducer
    copies the gradients into buckets rebuilt in ready order, which meta tensors cannot do. The
    rebuild moves no split (DDPOptimizer splits at compile time, by parameter bytes), so the
    stand-in skips it; every other call reaches the real reducer."""

    def __init__(self, reducer: Any, before_forward: Any = None):
        self._reducer = reducer
        self._before_forward = before_forward

    def __getattr__(self, name: str) -> Any:
        return getattr(self._reducer, name)

    def _rebuild_buckets(self) -> bool:
        if self._before_forward is not None:  # where the real reducer checks the prior step's reduction
            self._before_forward()
        return False


class _LoggerOnMeta:
    """DDP's C++ logger, but ``set_runtime_stats_and_log`` (each forward) does nothing: on meta it records
    no time stats anyway and only prints, from C++ straight to stderr, "[rank0]:[W...] logger.cpp:329
    Warning: Time stats are currently only collected for CPU and CUDA devices" (TORCH_CPP_LOG_LEVEL,
    which would hide it, is read once, when torch is imported). Every other call reaches the real logger."""

    def __init__(self, logger: Any):
        self._logger = logger

    def __getattr__(self, name: str) -> Any:
        return getattr(self._logger, name)

    def set_runtime_stats_and_log(self) -> None:
        pass


def ddp_on_meta(ddp: Any, before_forward: Any = None, *, quiet: bool = True) -> Any:
    """A ``DistributedDataParallel`` built with ``init_sync=False`` over meta parameters, made to run
    its steps on meta: a comm hook that hands each bucket back as its allreduce's result (what an
    allreduce of one rank gives; gloo cannot reduce meta tensors), and the reducer's bucket rebuild
    skipped (:class:`_ReducerOnMeta`). The forward's hooks, ``_DDPSink`` and the reducer's autograd
    hooks run as on a GPU. ``before_forward()`` runs where the reducer would check that the prior
    step's reduction ended (DDP's forward, grad enabled). ``quiet`` (no ``--debug``): the logger's warning
    about meta's missing timer is left out (:class:`_LoggerOnMeta`)."""
    import torch

    reducer = getattr(ddp, "reducer", None)
    if reducer is None or not callable(getattr(reducer, "_rebuild_buckets", None)):
        raise _missing("DistributedDataParallel.reducer._rebuild_buckets")

    def handed_back(_state, bucket):
        fut = torch.futures.Future()
        fut.set_result(bucket.buffer())
        return fut

    ddp.register_comm_hook(None, handed_back)
    ddp.reducer = _ReducerOnMeta(reducer, before_forward)
    if quiet and callable(getattr(getattr(ddp, "logger", None), "set_runtime_stats_and_log", None)):
        ddp.logger = _LoggerOnMeta(ddp.logger)
    return ddp


def ddp_bucket_sizes(ddp: Any) -> dict:
    """DDP's own account of its gradient buckets, from ``DistributedDataParallel._get_ddp_logging_data()``
    (what torch logs through ``DDPLoggingData``): ``bucket_sizes`` (bytes of each flat bucket tensor the
    reducer allocated), ``total_parameter_size_bytes`` (the parameters it reduces) and
    ``gradient_as_bucket_view``."""
    getter = getattr(ddp, "_get_ddp_logging_data", None)
    if not callable(getter):
        raise _missing("DistributedDataParallel._get_ddp_logging_data")
    data = getter()
    sizes = str(data.get("bucket_sizes", "")).replace(" ", "")
    return {
        "bucket_sizes": [int(s) for s in sizes.split(",") if s],
        "total_parameter_size_bytes": int(data.get("total_parameter_size_bytes", 0)),
        "gradient_as_bucket_view": bool(int(data.get("gradient_as_bucket_view", 0))),
    }


def process_group_sizes() -> dict[str, int]:
    """Each live process group's name (what a functional collective in a graph names its group by:
    ``_c10d_functional.all_reduce(x, "sum", "0")``) -> its number of ranks, from ``distributed_c10d._world.pg_names``;
    empty where torch keeps no such table."""
    c10d = importlib.import_module("torch.distributed.distributed_c10d")
    names = getattr(getattr(c10d, "_world", None), "pg_names", None)
    if not isinstance(names, dict):
        return {}
    return {str(name): int(pg.size()) for pg, name in names.items()}
