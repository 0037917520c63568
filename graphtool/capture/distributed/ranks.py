"""Would every rank compile the same graphs? Each rank's model and inputs, built as a launch builds them.

A launch runs the same script on every rank, but the script may read its rank: a per-rank batch
(``get_distributed_model(world_size)`` that gives the last rank the remainder), a model sized by
the world size, a ``print`` under ``if dist.get_rank() == 0`` inside the forward. Each such rank
compiles its own graphs. graphtool builds every rank's model in torch's fake process group (this
process as rank ``r`` of ``world_size``, with torchrun's ``RANK``/``WORLD_SIZE`` variables set),
takes a cheap :class:`RankSignature` of each (its inputs' shapes, its parameters' shapes, its
modules), and :func:`ranks_to_trace` says which ranks need a trace of their own: one of each
distinct signature, and rank 1 and the last rank too when the script reads the rank (the code path a
signature cannot show). A test compares the prediction with real gloo runs of 2 and 4 processes.

Example::

    >>> sig = [rank_signature("examples/mlp.py", None, (), r, 4) for r in range(4)]
    >>> ranks_to_trace(sig, reads_rank=False)
    []
"""

from __future__ import annotations

import ast
import contextlib
import os
import re
from dataclasses import dataclass
from typing import Any, Optional

from graphtool.capture import compat
from graphtool.errors import GraphtoolError

#: what torchrun sets in each rank's environment (a script may read them instead of the group)
LAUNCH_ENV = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE")
#: the calls and variables through which a script learns its rank
RANK_READERS = frozenset({"get_rank", "get_node_local_rank", "get_local_rank", "RANK", "LOCAL_RANK"})


@dataclass(frozen=True)
class TensorSig:
    name: str
    shape: tuple[int, ...]
    dtype: str
    requires_grad: bool

    def to_dict(self) -> dict:
        return {"name": self.name, "shape": list(self.shape), "dtype": self.dtype, "requires_grad": self.requires_grad}


@dataclass(frozen=True)
class RankSignature:
    """What a rank's compile depends on that graphtool can see without compiling: its inputs, its
    parameters' shapes and its modules. Ranks with equal keys get the same graphs unless their
    code path differs (see :func:`reads_rank`)."""

    rank: int
    inputs: tuple[TensorSig, ...]
    params: tuple[tuple[str, tuple[int, ...]], ...]
    modules: tuple[str, ...]  # "name:Type", in the model's order
    read_rank: bool = False  # the script asked for its rank while the model was built

    @property
    def key(self) -> tuple:
        return (self.inputs, self.params, self.modules)


@contextlib.contextmanager
def launch_env(rank: int, world_size: int):
    """torchrun's environment variables for ``rank`` of ``world_size`` (one node), restored after."""
    saved = {k: os.environ.get(k) for k in LAUNCH_ENV}
    os.environ.update(RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE=str(world_size),
                      LOCAL_WORLD_SIZE=str(world_size))
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


@contextlib.contextmanager
def as_rank(rank: int, world_size: int):
    """This process as rank ``rank`` of ``world_size``: torch's fake process group and torchrun's
    variables. Yields a list that gets one entry each time the code inside asks for its rank."""
    import torch.distributed as dist

    reads: list[int] = []
    original = dist.get_rank

    def get_rank(*args, **kwargs):
        reads.append(1)
        return original(*args, **kwargs)

    compat.init_fake_process_group(world_size, rank=rank)
    dist.get_rank = get_rank
    try:
        with launch_env(rank, world_size):
            yield reads
    finally:
        dist.get_rank = original
        if dist.is_initialized():
            dist.destroy_process_group()


def rank_signature(target: Any, entry: Optional[str], factory_args: tuple, rank: int, world_size: int) -> RankSignature:
    """Build rank ``rank``'s model and inputs as its process would, and take their signature.
    A failure in the script is reported as the rank's (``rank 3 of 4: model.py:12: ...``)."""
    from graphtool.capture.user.script import load_model

    with on_rank(rank, world_size), as_rank(rank, world_size) as reads:
        spec = load_model(target, entry, factory_args=factory_args)
        return signature_of(spec, rank, bool(reads))


def signature_of(spec: Any, rank: int, read_rank: bool = False) -> RankSignature:
    from graphtool.capture.tensors import iter_tensors
    from graphtool.capture.user.input_names import argument_names

    names = argument_names(spec)
    inputs = tuple(
        TensorSig(names.get(id(t), f"input {i}"), tuple(t.shape), str(t.dtype).replace("torch.", ""), bool(t.requires_grad))
        for i, t in enumerate(iter_tensors((spec.args, spec.kwargs)))
    )
    model = spec.model
    params = tuple((n, tuple(p.shape)) for n, p in model.named_parameters()) if hasattr(model, "named_parameters") else ()
    modules = tuple(f"{n}:{type(m).__name__}" for n, m in model.named_modules()) if hasattr(model, "named_modules") else ()
    return RankSignature(rank, inputs, params, modules, read_rank)


@contextlib.contextmanager
def on_rank(rank: int, world_size: int):
    """Name the rank in any error graphtool reports from inside (the script raising, ``--timeout``);
    with one rank there is nothing to tell apart."""
    if world_size == 1:
        yield
        return
    try:
        yield
    except GraphtoolError as exc:
        if not exc.message.startswith("rank "):
            exc.message = f"rank {rank} of {world_size}: {exc.message}"
            exc.args = (exc.message,)
        raise
    except BaseException as exc:  # --timeout's alarm: the deadline names the rank from this
        if not hasattr(exc, "on_rank"):
            with contextlib.suppress(AttributeError):
                exc.on_rank = f"rank {rank} of {world_size}"
        raise


def reads_rank(target: Any) -> tuple[int, ...]:
    """The lines of the script that read the rank (``dist.get_rank()``, ``os.environ["RANK"]``), found
    without importing it: a forward that branches on the rank compiles differently per rank."""
    from graphtool.capture.user.script import split_target

    if not isinstance(target, (str, os.PathLike)):
        return ()
    path, _ = split_target(os.fspath(target))
    try:
        tree = ast.parse(open(path, "rb").read())
    except (OSError, SyntaxError, ValueError):
        return ()
    lines = set()
    for node in ast.walk(tree):
        word = (node.attr if isinstance(node, ast.Attribute) else node.id if isinstance(node, ast.Name)
                else node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None)
        if word in RANK_READERS:
            lines.add(node.lineno)
    return tuple(sorted(lines))


def ranks_to_trace(signatures: list[RankSignature], *, reads_rank: bool) -> list[int]:
    """The ranks other than 0 to trace: the first of each signature rank 0 does not share, and, when
    the script reads its rank, rank 1 and the last rank (a ``rank == 0`` or ``rank == world - 1``
    branch shows in one of them; ranks between are taken to compile as rank 1)."""
    seen = {signatures[0].key}
    chosen = []
    for sig in signatures[1:]:
        if sig.key not in seen:
            seen.add(sig.key)
            chosen.append(sig.rank)
    if reads_rank or any(s.read_rank for s in signatures):
        chosen.extend(r for r in (1, len(signatures) - 1) if r > 0)
    return sorted(set(chosen))


def guard_failure(model: Any, first: Any, other: Any) -> Optional[str]:
    """torch's own words for why rank 0's compiled code would not serve another rank's inputs: compile
    ``model`` (rank 0's) on ``first`` (rank 0's inputs), call it on ``other`` and return the guard that
    failed (None when it ran without a recompile). Dynamo only, no AOT: a second or so."""
    import torch

    from graphtool.capture.graph_breaks import BreakRecorder

    compat.dynamo_reset()
    compiled = torch.compile(model, backend="eager")
    recorder = BreakRecorder()
    with recorder, torch.no_grad():
        try:
            compiled(*first.args, **first.kwargs)
            compiled(*other.args, **other.kwargs)
        except Exception:  # the other rank's inputs need the other rank's model: nothing to say here
            return None
    compat.dynamo_reset()
    reasons = [str(f.recompile_reason).strip() for f in recorder.frames if getattr(f, "recompile_reason", None)]
    # torch's text starts with the failing guard's compile id ("0/0: tensor 'x' ...")
    return re.sub(r"^\d+/\d+: ", "", reasons[0]) if reasons else None
