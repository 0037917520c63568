"""``graphtool.load(model_or_script, *inputs, **options)``: one model, loaded once, asked every question.

A :class:`Session` owns the model's one load (a script runs once: :class:`~graphtool.capture.load_once.LoadOnce`; a
caller's object has its state put back after each question: :class:`~graphtool.capture.model_object.ModelObject`),
its launch (alone, under DDP or under FSDP2: :mod:`graphtool.commands.launch`) and the options every command shares
(:data:`graphtool.commands.options.LOAD`, checked once, here). Each command is a method (``session.trace()``,
``session.cudagraphs(steps=3)``) that runs its module's ``run(session, **options)``, found by name in the option
table; what one question computed is kept for the next: the own-device trace, each stand-in trace, each CUDA-graph
verdict with its steady state, each answer: they describe the model as it was first asked (load it again after
training it further). A command that needs another's answer asks the session (``report`` asks for the trace, the
verdict, the devices and the memory), so every view of a model reads one object. The CLI builds one per model from
argv; ``graphtool.trace(model, x)`` is a one-line use of one.

    >>> with Session("examples/mlp.py") as s:
    ...     t, m = s.trace(), s.mutations()
    >>> t.summary(), m.summary(), s.loads.runs
    ('1 compiled region, 0 graph breaks, 0 skipped frames, 0 inputs mutated', 'no input is mutated and no output aliases an input', 1)
"""

from __future__ import annotations

import contextlib
import importlib
import os
from pathlib import Path
from typing import Any, Optional

from graphtool.capture.steady_state import DEFAULT_STEPS
from graphtool.commands.options import COMMANDS, LOAD, split, unknown_option
from graphtool.commands.progress import SILENT, quiet_stdout
from graphtool.errors import UsageError

#: how many steps a stand-in trace runs: enough for a guard that fails on the second call and a CUDA graph recorded
#: on the call after its warm-up
STEPS = DEFAULT_STEPS


class Session:
    """One model (a script's path, or a model object and its inputs), loaded once, with the options every command
    shares; one method per command, each answer kept. See the module."""

    def __init__(self, model: Any = None, *inputs, one_question: bool = False, **options):
        from graphtool.commands.launch import launch_from

        for name in options:
            if name not in _LOAD_NAMES:
                raise unknown_option("graphtool.load()", name, _LOAD_NAMES)
        o = {**{opt.name: opt.default for opt in LOAD}, **options}
        self.entry, self.device, self.inference, self.debug = o["entry"], o["device"], bool(o["inference"]), bool(o["debug"])
        self.backend = check_aot_backend(o["backend"])
        self.progress = o["progress"] or SILENT
        from graphtool.capture.user.deadline import check_timeout

        self.timeout = check_timeout(o["timeout"])
        self.launch = launch_from(o, self.device)
        self.optimizer = o["optimizer"]
        if self.optimizer is not None and not callable(self.optimizer):
            raise UsageError(f"optimizer={self.optimizer!r}: a callable taking the model, as a script's get_optimizer",
                             hint="optimizer=lambda model: torch.optim.AdamW(model.parameters())")
        self.object = None
        if model is None or isinstance(model, (str, os.PathLike)):
            if inputs or o["model_kwargs"]:
                raise UsageError("inputs and model_kwargs= are a model object's: a script builds its own",
                                 hint="pass the model object itself, or drop the inputs")
            from graphtool.capture.load_once import LoadOnce
            from graphtool.capture.user.script import check_script_path

            self.target = os.fspath(model) if model is not None else str(bundled_example())
            check_script_path(self.target)  # before torch is imported: a wrong path costs no seconds
            self.loads = LoadOnce(standin=True)
        else:
            if self.entry is not None:
                raise UsageError("entry= names a script's factory: a model object is its own model")
            if self.device not in (None, "meta"):
                raise UsageError(f"device={self.device!r}: a model object is traced where it is; move it first "
                                 f"(model.to({self.device!r}))", hint="device='meta' traces a copy on the meta device")
            from graphtool.capture import compat

            compat.import_torch()
            from graphtool.capture.model_object import ModelObject

            self.object = self.target = ModelObject(model, tuple(inputs), dict(o["model_kwargs"] or {}))
            self.object.spec.optimizer = self.optimizer
        self._kept: dict = {}
        #: the session answers one question and closes (the CLI's, :func:`each`'s, ``graphtool.report(model)``'s):
        #: a trace that question no longer reads is forgotten before the next one is made
        self.one_question = one_question
        self._asking = 0
        self._torch_ready = False

    # -- the session's life -------------------------------------------------------------------------------------
    def __enter__(self) -> Session:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        """Forget every answer and trace kept (the model object was put back after each question)."""
        self._kept.clear()

    def __repr__(self) -> str:
        return f"<graphtool.Session {self.name}: {', '.join(k[0] for k in self._kept if isinstance(k[0], str)) or 'nothing asked yet'}>"

    @property
    def name(self) -> str:
        return self.object.spec.entry if self.object is not None else Path(self.target.split(":")[0]).name

    # -- asking -------------------------------------------------------------------------------------------------
    def ask(self, command: str, options: dict) -> Any:
        """``command``'s answer for ``options`` (checked against the table), kept when the command allows it."""
        for name in options:
            if name not in _OWN[command]:
                raise unknown_option(f"Session.{command}()", name, _OWN[command])
        run = importlib.import_module(f"graphtool.commands.{command}").run
        asked = {o.name: o.default for o in COMMANDS[command].keywords} | options  # the defaults: the table's alone
        timed = COMMANDS[command].timed
        if not COMMANDS[command].cached:
            return self._asked(run, asked, timed)
        return self._keep((command, _frozen(asked)), lambda: self._asked(run, asked, timed))  # one question, however put

    def _asked(self, run, options: dict, timed: bool = True):
        """The question at the top runs within ``timeout``, with the caller's model object entered (its state
        taken, and put back when the question is answered); a question another asks runs inside that one."""
        if self._asking:
            return run(self, **options)
        from graphtool.capture.stack_room import call_with_stack_room
        from graphtool.capture.user.deadline import deadline

        self._asking += 1
        try:
            with self.object if self.object is not None else contextlib.nullcontext(), \
                    deadline(self.timeout if timed else None):
                return call_with_stack_room(run, self, **options)
        finally:
            self._asking -= 1

    def _keep(self, key: tuple, make):
        if key not in self._kept:
            self._kept[key] = make()
        return self._kept[key]

    # -- the one load -------------------------------------------------------------------------------------------
    def spec(self, *, entry: Optional[str] = None, factory_args: tuple = (), wrapped: bool = False):
        """The model on its own device, as loaded (its state put back after an earlier use). ``entry`` and
        ``factory_args``: the factory a launch calls (``get_distributed_model(world_size)``); ``wrapped``: the
        caller runs it under a wrapper that may change it in place (a caller's object is copied for it)."""
        if self.object is not None:
            from graphtool.capture import compat

            compat.check_installed_torch()
            spec = self.object.load()
            if self.device == "meta":
                from graphtool.capture.standin.meta import copy_to_meta

                return copy_to_meta(spec)
            return _deep_copy(spec) if wrapped else spec
        with quiet_stdout():
            self._import_torch()
            spec = self.loads.own(self._key(entry, factory_args), wrapped=wrapped)
        if self.optimizer is not None:  # the loop's optimizer, as the caller gave it (else the script's get_optimizer)
            spec.optimizer = self.optimizer
        return spec

    def standin_spec(self, *, entry: Optional[str] = None, factory_args: tuple = ()):
        """``(spec, accelerator)`` for a stand-in trace: a fresh meta copy of the model (``"meta"``), or the model
        itself on its GPU (``"cuda"``); :meth:`on_standin` makes the copy of a caller's object."""
        from graphtool.capture.standin.meta import accelerator_of

        if self.object is not None:
            spec = self.spec(entry=entry, factory_args=factory_args)
            return spec, accelerator_of(spec)
        with quiet_stdout():
            self._import_torch()
            return self.loads.standin(self._key(entry, factory_args))

    def on_gpu(self) -> bool:
        """The model lives on a GPU, so its stand-in is itself (:meth:`standin_spec`'s ``"cuda"``)."""
        from graphtool.capture.standin.meta import accelerator_of

        if self.object is not None:
            return self.device != "meta" and accelerator_of(self.object.spec) == "cuda"
        with quiet_stdout():
            self._import_torch()
            return self.loads.accelerator(self._key(None, ())) == "cuda"

    def fresh_spec(self, entry: Optional[str], factory_args: tuple):
        """The model built afresh, as another rank's process builds it (its script may read its rank): the script
        runs again; a caller's object is copied."""
        if self.object is not None:
            return _deep_copy(self.object.load())
        from graphtool.capture.user.script import load_model

        with quiet_stdout():
            return load_model(self.target, entry=entry, device=self.device, factory_args=factory_args)

    def on_standin(self, spec, accel: str):
        """``spec`` as the stand-in trace takes it: moved to meta when meta stands for the accelerator, the caller's
        own object (``spec.borrowed``) as a meta copy so that it stays where it is."""
        if accel != "meta":
            return spec
        from graphtool.capture.standin.meta import copy_to_meta, to_meta

        self.progress.phase("moving the model to the meta device (the accelerator stand-in)...")
        with quiet_stdout():
            return to_meta(spec) if not spec.borrowed else copy_to_meta(spec)

    def _key(self, entry, factory_args) -> tuple:
        return (self.target, entry or self.entry, self.device, tuple(factory_args))

    def _import_torch(self) -> None:
        if self._torch_ready:
            return
        self.progress.phase("importing torch...")
        from graphtool.capture import compat

        compat.import_torch()
        compat.freeze_gc_after_import()
        self.progress.phase(f"loading {self.name}...")
        self._torch_ready = True

    @property
    def is_object(self) -> bool:
        """The model came as an object (``graphtool.load(model, x)``), not as a script to run."""
        return self.object is not None

    # -- the traces every command shares, each kept ---------------------------------------------------------------
    def trace_spec(self, spec, *, backend: Optional[str] = None, **options):
        """``spec`` traced with this session's settings (:func:`graphtool.capture.tracer.trace_model`'s
        ``options``), the model's prints on stderr."""
        from graphtool.capture.tracer import trace_model

        options.setdefault("inference", self.inference)
        with quiet_stdout():
            return trace_model(spec, backend=backend or self.backend, quiet=not self.debug,
                               on_region=lambda i: self.progress.phase(f"tracing region {i}..."), **options)

    def own_trace(self):
        """``(capture, what the wrapper did, the launch it ran in)``: the trace on the model's own device under the
        launch, kept. A session kept for more questions, of a model alone on its GPU, reads it from the first step of
        :meth:`standin_trace` (which traces on the GPU itself): one trace answers trace, mutations, devices and
        cudagraphs, where a model on the CPU needs two (its own device's graphs, and the accelerator's on meta)."""
        def own():
            if not self.one_question and not self.launch.wrapped and self.on_gpu():
                from graphtool.commands.launch import Opened

                capture, _accel, wrapped = self.first_step()
                return capture, wrapped, Opened(None, self.entry)
            return self.launch.trace_own(self)
        return self._keep(("own",), own)

    def done_with(self, *kinds: str) -> None:
        """The question being answered reads the traces kept under ``kinds`` no more (``"own"``; ``"standin"`` and the
        ``"verdict"`` that holds it). A one-question session forgets them, so what comes next (another trace, the page)
        reuses their memory (issue 49: ``report`` on a 5,502-module model peaked in its second trace, on the first one's
        leftovers); a session the caller keeps keeps them for the next question."""
        if self.one_question:
            for key in [k for k in self._kept if k[0] in kinds]:
                del self._kept[key]

    def standin_trace(self, backend: Optional[str] = None, steps: int = STEPS, dynamic: bool = False):
        """``(capture, accelerator, what the wrapper did)``: the accelerator view under the launch, ``steps`` steps
        as a loop runs them, kept; ``accelerator`` is ``"meta"`` for the stand-in."""
        backend = backend or self.backend
        return self._keep(("standin", backend, steps, dynamic),
                          lambda: self.launch.standin(self, backend, steps=steps, dynamic=dynamic))

    def first_step(self, backend: Optional[str] = None):
        """:meth:`standin_trace`'s capture and accelerator as its first step left them (what a later step added, a
        recompile's region, left out; :meth:`Capture.first_step`): what ``devices``, ``render`` and the report's
        pictures read, and on a GPU the session's own-device trace too."""
        capture, accel, wrapped = self.standin_trace(backend)
        return capture.first_step(), accel, wrapped

    def verdict(self, backend: str = "inductor", steps: int = STEPS, dynamic: bool = False, settings=()):
        """``(verdict, capture, accelerator, what the wrapper did)``: would CUDA graphs be applied under ``backend``,
        judged on :meth:`standin_trace`'s ``steps`` steps with their steady state, kept. ``cudagraphs``,
        ``trace --cudagraphs``, ``report`` and ``bench --cudagraphs`` all read this one verdict."""
        def judge():
            from dataclasses import replace

            from graphtool.analysis.cudagraphs.verdict import check_cudagraph_backend, cudagraph_verdict, parse_settings
            from graphtool.analysis.steady_state import steady_state

            check_cudagraph_backend(backend)
            overrides = parse_settings(settings)
            capture, accel, wrapped = self.standin_trace(backend, steps, dynamic)
            verdict = cudagraph_verdict(capture, backend=backend, predicted=accel == "meta", settings=overrides)
            return replace(verdict, steady=steady_state(capture, verdict)), capture, accel, wrapped
        return self._keep(("verdict", backend, steps, dynamic, tuple(settings)), judge)

    def trace_standin(self, backend: str, steps: int, dynamic: bool, run):
        """The stand-in trace inside the launch ``run`` opened: ``(capture, accelerator)``. When eager code between
        regions needs tensor data the stand-in lacks (``.item()``, a data-dependent branch), the values are recorded
        from a run on the model's own device and replayed, so every region torch compiles is judged
        (``capture.regions_compiled`` says how many); under a wrapper a stopped stand-in is not retried."""
        spec, accel = self.standin_spec(entry=run.entry, factory_args=run.factory_args)
        capture = self._on_standin(spec, accel, backend, steps, dynamic, wrapper=run.session)
        if capture.stopped and accel == "meta" and run.session is None:
            capture = self._judge_every_region(capture, backend, steps, dynamic)
        if capture.stopped:
            self.progress.note(capture.stopped)
        return capture, accel

    def _on_standin(self, spec, accel, backend, steps, dynamic, host_values=None, wrapper=None):
        spec = self.on_standin(spec, accel)
        self.progress.phase("tracing on the accelerator stand-in..." if accel == "meta" else "tracing on the GPU...")
        return self.trace_spec(spec, backend=backend, standin=accel == "meta", dynamic=dynamic, host_values=host_values,
                               host_mode="replay" if host_values is not None else None, steps=steps, wrapper=wrapper)

    def _judge_every_region(self, stopped, backend, steps, dynamic):
        """The stand-in stopped at a host sync: record the values a run on the own device reads, replay them."""
        from dataclasses import replace

        from graphtool.capture.standin.host_values import HostValues

        values = HostValues()
        self.progress.phase("the stand-in needs tensor values: recording them from a run on the model's own device...")
        own = self.trace_spec(self.spec(), backend=backend, record_breaks=False, dynamic=dynamic, host_values=values,
                              host_mode="record", steps=steps)
        retry = self._on_standin(self.standin_spec()[0], "meta", backend, steps, dynamic, host_values=values)
        best = retry if len(retry.regions) >= len(stopped.regions) else stopped
        compiled = len(own.regions)
        if best.stopped or len(best.regions) != compiled:
            note = best.stopped or f"the stand-in compiled {len(best.regions)} regions where the own-device run compiled {compiled}"
            return replace(best, stopped=note, regions_compiled=max(compiled, len(best.regions)))
        return replace(best, regions_compiled=compiled)


def _make_method(command):
    """The Session's method for ``command``: its signature and docs from the option table."""
    import inspect

    def method(self, **options):
        return self.ask(command.name, options)

    params = [inspect.Parameter("self", inspect.Parameter.POSITIONAL_ONLY)]
    params += [inspect.Parameter(o.name, inspect.Parameter.KEYWORD_ONLY, default=o.default) for o in command.keywords]
    method.__signature__ = inspect.Signature(params)
    method.__name__ = method.__qualname__ = command.name
    method.__doc__ = f"``graphtool {command.name}``: {command.summary} (docs/options.md lists each option.)"
    return method


_LOAD_NAMES = frozenset(o.name for o in LOAD)
_OWN = {name: {o.name for o in c.keywords} for name, c in COMMANDS.items()}
for _command in COMMANDS.values():
    setattr(Session, _command.name, _make_method(_command))


def per_model(command: str, *, first: bool = False):
    """``commands.COMMAND.COMMAND(model=None, **options)``: the command asked of each model (:func:`each`); ``first``:
    of the first model alone (bench)."""
    def asked(model=None, **options):
        return each(command, model, options, first=first)

    asked.__name__ = asked.__qualname__ = command
    asked.__doc__ = f"``graphtool {command}`` of each model: its ``run`` in a Session each (:func:`each`)."
    return asked


def each(command: str, model: Any = None, options: Optional[dict] = None, *, first: bool = False) -> Any:
    """``command`` asked of each model (MODEL, else the config's models, else the bundled example), a Session each:
    what ``graphtool.commands.trace.trace("model.py", ...)`` and its siblings are."""
    load, own = split(command, dict(options or {}))
    found = targets(model if model is None or isinstance(model, (str, os.PathLike)) else None, load.pop("entry", None))
    if model is not None and not isinstance(model, (str, os.PathLike)):
        found = [(model, None)]
    answers = []
    for target, entry in found[:1] if first else found:
        with Session(target, **({"entry": entry} if entry else {}), one_question=True, **load) as s:
            answers.append(s.ask(command, own))
    return answers[0] if first else answers


def targets(model: Optional[str], entry: Optional[str]) -> list[tuple[str, Optional[str]]]:
    """The models a command runs on: MODEL, else the config's models, else the bundled example."""
    if model:
        return [(os.fspath(model), entry)]
    from graphtool.config import find_config, load_config

    found = find_config()
    if found is not None:
        cfg = load_config(found)
        if cfg.models:
            return [(str(m.path), entry or m.entry) for m in cfg.models]
    return [(str(bundled_example()), entry)]


def bundled_example() -> Path:
    return Path(__file__).resolve().parents[1] / "bundled" / "example_model.py"


def check_aot_backend(backend: str) -> str:
    """``--backend``: a torch.compile backend whose AOT stage graphtool reproduces (``compat.AOT_BACKENDS``)."""
    from graphtool.capture.compat import AOT_BACKENDS

    if backend not in AOT_BACKENDS:
        raise UsageError(f"--backend {backend!r} is not one of {', '.join(AOT_BACKENDS)}",
                         hint="graphtool shows the graphs of inductor (torch.compile's default), aot_eager or cudagraphs")
    return backend


def _frozen(value: Any) -> Any:
    """``value`` as a key of what a session keeps: lists as tuples, dicts sorted, anything else by identity."""
    if isinstance(value, dict):
        return tuple(sorted((k, _frozen(v)) for k, v in value.items()))
    if isinstance(value, (list, tuple)):
        return tuple(_frozen(v) for v in value)
    try:
        hash(value)
        return value
    except TypeError:
        return ("id", id(value))


def _deep_copy(spec):
    from graphtool.capture.load_once import deep_copy

    copied = deep_copy(spec)
    if copied is None:
        raise UsageError(f"{spec.entry}: a launch changes the model in place and this model object cannot be copied",
                         hint="pass a script instead, or a model Python can deep-copy")
    return copied
