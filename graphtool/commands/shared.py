"""Steps several commands share: which models to run on, loading a script, and the two traces.

The own-device trace is what torch.compile sees on the user's machine; the stand-in trace moves the
model to the meta device standing for a GPU (or traces on the real GPU) for devices and CUDA graphs.
User code's prints go to stderr meanwhile: stdout carries only graphtool's one document.
"""

from __future__ import annotations

import contextlib
import contextvars
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Optional

from graphtool.commands.progress import SILENT, Progress
from graphtool.commands.result import Result
from graphtool.schema import stamped


def bundled_example() -> Path:
    return Path(__file__).resolve().parents[1] / "bundled" / "example_model.py"


def targets(model: Optional[str], entry: Optional[str]) -> list[tuple[str, Optional[str]]]:
    """The models a command runs on: MODEL, else the config's models, else the bundled example."""
    if model:
        return [(model, entry)]
    from graphtool.config import find_config, load_config

    found = find_config()
    if found is not None:
        cfg = load_config(found)
        if cfg.models:
            return [(str(m.path), entry or m.entry) for m in cfg.models]
    return [(str(bundled_example()), entry)]


def quiet_stdout():
    """The user's own prints go to stderr: stdout carries only graphtool's output."""
    return contextlib.redirect_stdout(sys.stderr)


#: the command's :class:`~graphtool.capture.load_once.LoadOnce` while :func:`one_load` is open
_ONE_LOAD: contextvars.ContextVar = contextvars.ContextVar("graphtool_one_load", default=None)


@contextlib.contextmanager
def one_load(*, standin: bool = False, plain: bool = False):
    """Inside, the script runs once: every :func:`load` and :func:`load_standin` of it is served from
    that one run (the own-device spec with its state put back, the stand-in a meta copy); see
    :mod:`graphtool.capture.load_once`. A command opens one per model when it traces the model more
    than once: ``standin`` when it traces the stand-in, ``plain`` when it traces the model under
    ``--ddp``/``--fsdp2`` and also plainly (``trace --bench``)."""
    from graphtool.capture.load_once import LoadOnce

    token = _ONE_LOAD.set(LoadOnce(standin=standin, plain=plain, loader=_load_script))
    try:
        yield
    finally:
        _ONE_LOAD.reset(token)


def loading_once() -> bool:
    """Whether a :func:`one_load` is open: a command calling another's function inside it shares its one load."""
    return _ONE_LOAD.get() is not None


@contextlib.contextmanager
def own_load():
    """Inside, a load runs the script afresh: another rank's model, built as that rank's process would
    build it (its script may read its rank), is not rank 0's."""
    token = _ONE_LOAD.set(None)
    try:
        yield
    finally:
        _ONE_LOAD.reset(token)


def load(target: Optional[str], entry: Optional[str], device: Optional[str], progress: Progress = SILENT,
         factory_args: tuple = (), *, wrapped: bool = False):
    """Import torch (checking its version) and load the script: its :class:`ModelSpec`. A model
    object (:class:`~graphtool.capture.model_object.ModelObject`, from :mod:`graphtool.api`) is not
    imported: its spec comes back with the caller's state put back; inside :func:`one_load` neither is
    a script run twice. ``factory_args`` go to the script's factory (``get_distributed_model(world_size)``
    under ``--ddp``); ``wrapped``: the trace runs the model under ``--ddp``/``--fsdp2``'s wrapper."""
    if is_model_object(target):
        return _load_object(target, device)
    target = target or str(bundled_example())
    with quiet_stdout():
        _import_torch(target, progress)
        once = _ONE_LOAD.get()
        if once is None:
            return _load_script(target, entry=entry, device=device, factory_args=factory_args)
        return once.own((target, entry, device, tuple(factory_args)), wrapped=wrapped)


def load_standin(target, entry, device, progress: Progress = SILENT, factory_args: tuple = ()):
    """``(spec, accelerator)`` for the stand-in trace: inside :func:`one_load` a fresh meta copy of the
    model the script built (or the model itself on its GPU), else a fresh load that the trace moves to meta."""
    once = _ONE_LOAD.get()
    if once is None or is_model_object(target):
        from graphtool.capture.standin.meta import accelerator_of

        spec = load(target, entry, device, progress, factory_args)
        return spec, accelerator_of(spec)
    target = target or str(bundled_example())
    with quiet_stdout():
        _import_torch(target, progress)
        return once.standin((target, entry, device, tuple(factory_args)))


def is_model_object(target) -> bool:
    """``target`` is a caller's model object (:mod:`graphtool.api`), not a script's path."""
    return hasattr(target, "load") and not isinstance(target, (str, Path))


def _import_torch(target: str, progress: Progress) -> None:
    progress.phase("importing torch...")
    from graphtool.capture import compat

    compat.import_torch()
    compat.freeze_gc_after_import()
    progress.phase(f"loading {Path(target.split(':')[0]).name}...")


def _load_script(target, *, entry, device, factory_args, module=None):
    from graphtool.capture.user.script import load_model

    return load_model(target, entry=entry, device=device, factory_args=factory_args, module=module)


def _load_object(obj, device: Optional[str]):
    from graphtool.capture import compat

    compat.check_installed_torch()
    spec = obj.load()
    if device is None:
        return spec
    if device == "meta":
        from graphtool.capture.standin.meta import copy_to_meta

        return copy_to_meta(spec)
    from graphtool.errors import UsageError

    raise UsageError(f"device={device!r}: a model object is traced where it is; move it first (model.to({device!r}))",
                     hint="device='meta' traces a copy on the meta device")


def trace_own_device(target, entry, device, inference: bool, *, backend: str = "inductor", record_breaks: bool = True,
                     debug: bool = False, progress: Progress = SILENT, wrapper=None, factory_args: tuple = (),
                     steps: int = 1):
    """Load the script and trace it on its own device with ``backend``'s AOT stage: a
    :class:`~graphtool.capture.tracer.Capture`."""
    spec = load(target, entry, device, progress, factory_args, wrapped=wrapper is not None)
    from graphtool.capture.tracer import trace_model

    progress.phase(f"tracing with dynamo + {backend}'s AOT stage...")
    with quiet_stdout():
        return trace_model(
            spec, inference=inference, backend=backend, record_breaks=record_breaks, quiet=not debug,
            on_region=lambda i: progress.phase(f"tracing region {i}..."), wrapper=wrapper, steps=steps,
        )


def trace_standin(target, entry, device, inference: bool, *, backend: str = "inductor", dynamic: bool = False,
                  debug: bool = False, progress: Progress = SILENT, steps: int = 1, wrapper=None,
                  factory_args: tuple = ()):
    """The accelerator view: trace on the model's GPU, or on meta standing for one.

    Returns ``(capture, accelerator)``; ``accelerator`` is ``"meta"`` for the stand-in. When eager
    code between regions needs tensor data the stand-in lacks (``.item()``, a data-dependent
    branch), the values are recorded from a run on the model's own device and replayed, so every
    region torch compiles is judged; ``capture.regions_compiled`` says how many that is. ``steps``: how
    many times the step runs, as a loop would (``capture.steps``, see :mod:`graphtool.capture.steady_state`).
    ``wrapper`` (``--ddp``'s session) runs the stand-in as ``DDP(torch.compile(model))``; a stand-in
    under DDP that stops is not retried with recorded host values. The script runs once, the replay's
    run on the own device included (:func:`one_load`, opened here when the command has not)."""
    with one_load(standin=True) if _ONE_LOAD.get() is None else contextlib.nullcontext():
        spec, accel = load_standin(target, entry, device, progress, factory_args)
        capture = _standin_trace(spec, accel, inference, backend, dynamic, debug, progress, steps=steps, wrapper=wrapper)
        if capture.stopped and accel == "meta" and wrapper is None:
            capture = _judge_every_region(capture, target, entry, device, inference, backend, dynamic, debug, progress,
                                          steps=steps)
    if capture.stopped:
        progress.note(capture.stopped)
    return capture, accel


def on_standin(spec, accel: str, progress: Progress = SILENT):
    """``spec`` as the stand-in trace takes it: moved to meta when meta stands for the accelerator, the caller's own
    object (``spec.borrowed``) as a meta copy so that it stays where it is."""
    if accel != "meta":
        return spec
    from graphtool.capture.standin.meta import copy_to_meta, to_meta

    progress.phase("moving the model to the meta device (the accelerator stand-in)...")
    return to_meta(spec) if not spec.borrowed else copy_to_meta(spec)


def _standin_trace(spec, accel, inference, backend, dynamic, debug, progress, host_values=None, steps=1, wrapper=None):
    from graphtool.capture.tracer import trace_model

    with quiet_stdout():
        spec = on_standin(spec, accel, progress)
        progress.phase("tracing on the accelerator stand-in..." if accel == "meta" else "tracing on the GPU...")
        return trace_model(
            spec, inference=inference, backend=backend, standin=accel == "meta", dynamic=dynamic, quiet=not debug,
            on_region=lambda i: progress.phase(f"tracing region {i}..."),
            host_values=host_values, host_mode="replay" if host_values is not None else None, steps=steps,
            wrapper=wrapper,
        )


def _judge_every_region(stopped, target, entry, device, inference, backend, dynamic, debug, progress, steps=1):
    """The stand-in stopped at a host sync: record the values a run on the own device reads, replay them."""
    from dataclasses import replace

    from graphtool.capture.standin.host_values import HostValues
    from graphtool.capture.tracer import trace_model

    values = HostValues()
    progress.phase("the stand-in needs tensor values: recording them from a run on the model's own device...")
    own_spec = load(target, entry, device, progress)
    with quiet_stdout():
        own = trace_model(own_spec, inference=inference, backend=backend, record_breaks=False, dynamic=dynamic,
                          quiet=not debug, host_values=values, host_mode="record", steps=steps)
    retry = _standin_trace(load_standin(target, entry, device, progress)[0], "meta", inference, backend, dynamic, debug,
                           progress, host_values=values, steps=steps)
    best = retry if len(retry.regions) >= len(stopped.regions) else stopped
    compiled = len(own.regions)
    if best.stopped or len(best.regions) != compiled:
        note = best.stopped or f"the stand-in compiled {len(best.regions)} regions where the own-device run compiled {compiled}"
        return replace(best, stopped=note, regions_compiled=max(compiled, len(best.regions)))
    return replace(best, regions_compiled=compiled)


def check_aot_backend(backend: str) -> str:
    """``--backend``: a torch.compile backend whose AOT stage graphtool reproduces (``compat.AOT_BACKENDS``)."""
    from graphtool.capture.compat import AOT_BACKENDS
    from graphtool.errors import UsageError

    if backend not in AOT_BACKENDS:
        raise UsageError(f"--backend {backend!r} is not one of {', '.join(AOT_BACKENDS)}",
                         hint="graphtool shows the graphs of inductor (torch.compile's default), aot_eager or cudagraphs")
    return backend


def model_header(capture) -> dict:
    """The ``model`` object every report starts with."""
    return {
        "path": str(capture.spec.path),
        "backend": capture.backend,
        "entry": capture.spec.entry,
        "device": capture.device,
        "training": capture.module_training,  # the model's own flag; whether a backward ran is in the graphs
        "grad_enabled": capture.grad_enabled,
        "stopped": capture.stopped,
        "regions_compiled": capture.regions_compiled if capture.regions_compiled is not None else len(capture.regions),
        "regions_judged": capture.regions_judged,
        "no_graph": capture.no_graph,
    }


@dataclass(frozen=True, repr=False)
class ModelResult(Result):
    """One model's report from mutations, devices, cudagraphs or memory, with its header (the document's
    ``model``) and whether it found anything (what ``--check`` exits 1 on). Each command's subclass says
    how its report reads: ``key``, its key in the document ("devices", "cudagraphs"; "" merges it in),
    :meth:`summary`, :meth:`body` (the terminal view) and :meth:`sections`."""

    key: ClassVar[str] = ""

    header: dict
    report: Any
    found: bool
    stopped: Optional[str] = None
    ddp: Any = None  # DdpReport (``cudagraphs --ddp``): the graphs DDP's optimizer split off
    rank: Any = None  # RankMemory (``memory --ddp``): what one rank holds
    fsdp2: Any = None  # Fsdp2Report (``cudagraphs --fsdp2``, ``memory --fsdp2``): what FSDP2 does, per rank
    fit: Any = None  # FitReport (``memory --fit``/``--budgets``): the step's predicted peak, per budget
    shapes: Any = None  # ShapeReport (``cudagraphs --schedule``): the loop's schedule, step by step

    def to_dict(self) -> dict:
        body = self.report.to_dict()
        return stamped(self.command, {"model": self.header, **(body if not self.key else {self.key: body}),
                **({"ddp": self.ddp.to_dict()} if self.ddp is not None else {}),
                **({"fsdp2": self.fsdp2.to_dict()} if self.fsdp2 is not None else {}),
                **({"rank_memory": self.rank.to_dict()} if self.rank is not None else {}),
                **({"fit": self.fit.to_dict()} if self.fit is not None else {}),
                **({"shapes": self.shapes.to_dict()} if self.shapes is not None else {})})

    def summary(self) -> str:
        return self.report.verdict()

    def body(self, **options):
        """The report's own view, below what every model's view starts with."""
        raise NotImplementedError

    def view(self, **options):
        """A model torch.compile captured no graph of says so first, then :meth:`body` (``options``: the
        command's view options, such as mutations' ``show_all``)."""
        if not self.header.get("no_graph"):
            return self.body(**options)
        from rich.console import Group
        from rich.text import Text

        return Group(Text(f"torch.compile captured no graph: {self.header['no_graph']}", style="verdict.bad"),
                     self.body(**options))

    @property
    def title(self) -> str:
        return self.header.get("entry") or "model"


def run_bench_modes(spec, *, compile_mode: str, cudagraphs: bool, backward: bool, warmup: int, iters: int,
                    repeat: int, blocked: Optional[str], progress: Progress = SILENT, debug: bool = False) -> list:
    """Check each mode against eager, then time it; progress counts timed iterations, and names the
    untimed steps between them (compiling, capturing) as phases. torch's logs show only with ``debug``."""
    from graphtool.capture.bench.modes import run_modes

    modes = 1 + (compile_mode not in (None, "none")) + 2 * cudagraphs
    total = modes * repeat * iters
    done = 0

    def advance(name: str, n: int) -> None:
        nonlocal done
        done += n
        progress.advance(done, total, f"timing {name}")

    with quiet_stdout():
        return run_modes(
            spec, compile_mode=compile_mode, cudagraphs=cudagraphs, backward=backward, warmup=warmup, iters=iters,
            repeat=repeat, capture_blocked=blocked, on_progress=advance, on_phase=progress.phase, quiet=not debug,
        )


def eager_vs_compiled(target, entry, *, compile_mode="default", backward=None, warmup=10, iters=100, repeat=3,
                      progress: Progress = SILENT):
    """Eager vs torch.compile with bench's defaults, where the script put the model (``trace --bench``); ``backward``
    None: training when the model trains, as bench decides."""
    spec = load(target, entry, None, progress)
    import torch

    from graphtool.analysis.bench_report import build_bench_report
    from graphtool.capture.bench.modes import cuda_device_of

    results = run_bench_modes(spec, compile_mode=compile_mode, cudagraphs=False, backward=backward, warmup=warmup,
                              iters=iters, repeat=repeat, blocked=None, progress=progress)
    cuda = cuda_device_of(spec)
    device = torch.cuda.get_device_name(cuda) if cuda is not None else "cpu"
    return build_bench_report(spec, device, results, backward=backward, warmup=warmup, iters=iters, repeat=repeat)
