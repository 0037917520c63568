"""``graphtool compile``: compile a model for real, in fresh child processes, and say where the time went.

A child compiles the model with the user's backend and mode on this machine's device, caches off (cold), under
``TORCH_TRACE`` in a temporary folder; its log gives torch's own per-phase timers for every frame, and its own clock
the first compiled call against an eager step and the compiled step. The same child compiles each repeated block
alone with dynamo (no code generation) to tell which blocks are identical. ``warm``: a second child with the caches
on, after the first filled a private cache (the hits). ``regional``: a child that compiles the identical blocks one
by one, timed the same way. Each child runs within what is left of ``timeout``; a child past it is killed with
its process group, and what finished is reported.

Example (a real compile; dynamo only with ``backend="eager"``)::

    >>> res = compile_model("examples/mlp.py", backend="eager", steps=1)  # doctest: +SKIP
    >>> res.report.full.seconds > 0  # doctest: +SKIP
    True
"""

from __future__ import annotations

import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from graphtool.commands.progress import SILENT, Progress
from graphtool.commands.result import Result
from graphtool.commands.session import per_model, targets
from graphtool.errors import EXIT_FINDINGS, EXIT_OK, EXIT_USAGE, GraphtoolError, UsageError

#: torch.compile's modes (``torch._inductor.list_mode_options``), checked before any child starts
MODES = ("default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")


@dataclass(frozen=True, repr=False)
class CompileResult(Result):
    """The compile-time report of one model (a :class:`~graphtool.analysis.compile_time.CompileReport`)."""

    command = "compile"

    report: object  # CompileReport

    def to_dict(self) -> dict:
        return self.report.to_dict()

    def exit_code(self) -> int:
        """0; 1 when the compile failed (torch's error is the finding); 2 when ``--timeout`` stopped a child."""
        stopped = self.report.stopped
        if stopped is None:
            return EXIT_OK
        return EXIT_USAGE if stopped.kind == "timeout" else EXIT_FINDINGS

    def summary(self) -> str:
        """``compile 41.3 s (cold, inductor); regional 12.0 s; 4 x LlamaDecoderLayer identical``."""
        r = self.report
        full = r.full
        parts = [f"compile {full.seconds:.1f} s" if full.seconds is not None else "compile did not finish"]
        parts[0] += f" ({'cold' if r.caches in ('off', 'empty') else r.caches}, {r.backend})"
        if r.warm is not None and r.warm.seconds is not None:
            parts.append(f"warm {r.warm.seconds:.1f} s")
        if r.regional is not None and r.regional.seconds is not None:
            parts.append(f"regional {r.regional.seconds:.1f} s")
        picked = r.identical_blocks
        if picked:
            parts.append(f"{picked[0].count} x {picked[0].cls} identical")
        if r.stopped is not None:
            parts.append("timed out" if r.stopped.kind == "timeout" else "the compile failed")
        return "; ".join(parts)

    def view(self):
        from graphtool.render.compile import compile_view

        return compile_view(self.report)

    def sections(self) -> list[str]:
        from graphtool.render.compile import compile_section

        return [compile_section(self.report)]

    def diagnostics(self) -> str:
        s = self.report.stopped
        if s is None:
            return ""
        where = f"{s.where()}: " if s.where() else ""
        return f"{where}{'torch.compile failed' if s.kind == 'compile_failed' else 'stopped'}: {s.message}"

    def _findings(self) -> str:
        return self.diagnostics()

    @property
    def title(self) -> str:
        return self.report.entry or Path(self.report.path).name


class _Ticker:
    """Says on ``progress`` which stage a child is in and which phase torch is compiling, from the child's status
    file and its TORCH_TRACE log, a few times a second."""

    def __init__(self, progress: Progress, status_path: Path, trace_dir: Path, label: str):
        from graphtool.capture.trace_tail import TraceTail

        self.progress, self.status_path, self.label = progress, status_path, label
        self.tail = TraceTail(trace_dir)
        self.started = time.monotonic()
        self.last = 0.0
        self.said = None

    def __call__(self) -> None:
        now = time.monotonic()
        if now - self.last < 0.25:
            return
        self.last = now
        from graphtool.analysis.compile_time import phase_now
        from graphtool.capture.processes.compile_job import read_status

        stages, _ = read_status(self.status_path)
        stage = stages[-1] if stages else "starting"
        phase = phase_now(self.tail.poll()) if stage.startswith("compiling") else None
        text = f"{self.label}: {stage}{f', {phase}' if phase else ''} ({now - self.started:.0f} s)"
        if text != self.said:
            self.said = text
            self.progress.phase(text)


#: ``graphtool compile`` of each model (a Session each), as ``graphtool.commands.cudagraphs.cudagraphs`` is
compile = per_model("compile")


def run(session, *, backend: str, mode: Optional[str], regional: bool, warm: bool, steps: int) -> CompileResult:
    """``session.compile()``: :func:`compile_model` on the session's script with its entry, device, ``inference``,
    ``timeout`` (all the children together), debug and progress. The compile runs in fresh processes, so a model
    object (``graphtool.load(model, x)``) cannot be handed to it: it needs the script's path."""
    if session.is_object:
        raise UsageError("graphtool compile compiles a model script in fresh processes: a model object cannot be handed "
                         "to them", hint="graphtool.load('model.py').compile(), or graphtool compile model.py")
    if session.device == "meta":
        raise UsageError("graphtool compile compiles and runs the model for real: --device meta has no data to run",
                         hint="cpu, or cuda[:N] (the default: cuda when present, else cpu)")
    return compile_model(session.target, entry=session.entry, backend=backend, mode=mode, device=session.device,
                         inference=session.inference, warm=warm, regional=regional, steps=steps, timeout=session.timeout,
                         debug=session.debug, progress=session.progress)


def compile_model(model: Optional[str] = None, *, entry: Optional[str] = None, backend: str = "inductor",
                  mode: Optional[str] = None, device: Optional[str] = None, inference: bool = False, warm: bool = False,
                  regional: bool = False, steps: int = 3, timeout: Optional[float] = None, debug: bool = False,
                  progress: Progress = SILENT) -> CompileResult:
    """Compile ``model`` (a script path, ``path.py:FACTORY``) for real in fresh children; see the module's docstring."""
    from graphtool.capture import compat
    from graphtool.capture.user.script import check_script_path

    if mode is not None and mode not in MODES:
        raise UsageError(f"--mode {mode!r} is not a torch.compile mode", hint=f"one of: {', '.join(MODES)}")
    if steps < 1:
        raise UsageError(f"--steps must be 1 or more, got {steps}")
    if timeout is not None:
        from graphtool.capture.user.deadline import check_timeout

        check_timeout(timeout, "--timeout")
    target, ent = targets(model, entry)[0]
    check_script_path(target)
    compat.check_installed_torch()  # torch runs only in the children: check (and warn) once, here
    with tempfile.TemporaryDirectory(prefix="graphtool-compile-", ignore_cleanup_errors=True) as tmp:
        return _Run(Path(tmp), str(target), ent, backend, mode, device, inference, steps, timeout, debug, progress).go(warm, regional)


class _Run:
    """The children of one ``graphtool compile``, run one after the other within one deadline."""

    def __init__(self, tmp: Path, target, entry, backend, mode, device, inference, steps, timeout, debug, progress):
        self.tmp, self.target, self.entry = tmp, target, entry
        self.backend, self.mode, self.device, self.inference = backend, mode, device, inference
        self.steps, self.debug, self.progress = steps, debug, progress
        self.deadline = None if timeout is None else time.monotonic() + timeout
        self.timeout = timeout
        self.cache_dir = str(tmp / "cache")

    def go(self, warm: bool, regional: bool) -> CompileResult:
        from graphtool.analysis.compile_time import CompileReport
        from graphtool.analysis.repeated_blocks import hazards, judge_blocks, raw_facts

        if warm:
            from graphtool.capture.processes.compile_job import caches_off_here

            off = caches_off_here()
            if off:
                self.progress.note(f"{', '.join(off)} turns inductor's caches off here: --warm turns them on in its own "
                                   "two processes (a private cache folder), so your runs with this environment compile cold")
        raw, full, stopped = self._stage("whole", "compiling the whole model", caches=warm)
        blocks = tuple(judge_blocks(raw.get("blocks") or [], raw.get("graphs") or []))
        warm_run = regional_run = None
        if warm and stopped is None:
            _, warm_run, stopped = self._stage("warm", "compiling again, caches on", caches=True, steps=0)
        picked = [b for b in blocks if b.identical]
        if regional and stopped is None and picked:
            fqns = tuple(f for b in picked for f in b.fqns)
            _, regional_run, stopped = self._stage("regional", f"compiling {len(fqns)} blocks one by one", caches=False,
                                                   blocks=fqns)
        found = hazards(list(blocks), raw_facts(raw.get("blocks") or [], raw.get("compiled_modules") or []),
                        list(regional_run.frames) if regional_run is not None else None) if regional and picked else []
        from graphtool import __version__
        from graphtool.analysis.compile_time import biggest_modules

        report = CompileReport(
            path=raw.get("model", {}).get("path") or str(Path(self.target).resolve()),
            entry=raw.get("model", {}).get("entry") or self.entry, graphtool_version=__version__,
            torch_version=raw.get("torch_version"), device=raw.get("device"), backend=self.backend, mode=self.mode,
            training=raw.get("training"), caches="empty" if warm else "off", full=full, warm=warm_run,
            regional=regional_run, blocks=blocks, modules=tuple(biggest_modules(raw.get("graphs") or [])),
            hazards=tuple(found), nested_compile_region=bool(raw.get("nested_compile_region")), regional_asked=regional,
            stopped=stopped)
        return CompileResult(report)

    def _left(self) -> Optional[float]:
        return None if self.deadline is None else self.deadline - time.monotonic()

    def _stage(self, stage: str, label: str, *, caches: bool, steps: Optional[int] = None, blocks: tuple = ()):
        """Run one child; (its raw result, its :class:`CompileRun`, why it stopped or None)."""
        from graphtool.analysis.compile_time import CompileRun, Failure, failure_of, read_log, run_from_child, wants_record
        from graphtool.capture.processes.compile_job import STAGE_ARTIFACT, CompileJob, read_status, run_compile_job
        from graphtool.capture.torch_trace import LogReader, log_files

        trace_dir, status_path = self.tmp / f"{stage}.trace", self.tmp / f"{stage}.status"
        trace_dir.mkdir()
        left = self._left()
        if left is not None and left <= 0:
            return {}, CompileRun(stage), Failure("timeout", f"--timeout {self.timeout:g} s ran out before {label}", "starting")
        job = CompileJob(path=self.target, entry=self.entry, stage=stage, trace_dir=str(trace_dir), status_path=str(status_path),
                         backend=self.backend, mode=self.mode, device=self.device, inference=self.inference,
                         steps=self.steps if steps is None else steps, caches=caches, cache_dir=self.cache_dir,
                         blocks=tuple(blocks), debug=self.debug)
        ticker = _Ticker(self.progress, status_path, trace_dir, label)
        self.progress.phase(f"{label}: starting a fresh process")
        raw = run_compile_job(job, timeout=left, on_tick=ticker)
        reader = LogReader(log_files([trace_dir]), want=lambda name, meta: wants_record(name, meta, STAGE_ARTIFACT))
        frames, inline = read_log(reader.records(), STAGE_ARTIFACT)
        if raw.get("ok"):
            if stage == "regional":
                raw = dict(raw, blocks_compiled=list(blocks))
            failure = failure_of(raw)
            return raw, run_from_child(stage, raw, frames, failure, inline=inline), failure
        stages, facts = read_status(status_path)
        if str(raw.get("error", "")).startswith("timed out"):
            was = stages[-1] if stages else "starting"
            stopped = Failure("timeout", f"--timeout {self.timeout:g} s ran out ({label}: {was}); the child was ended", was)
            return {}, run_from_child(stage, {}, frames, stopped, facts, inline), stopped
        err = GraphtoolError(raw.get("error") or f"the {stage} compile's child failed", hint=raw.get("hint"),
                             detail=raw.get("detail"))
        err.exit_code = int(raw.get("exit_code") or 3)
        raise err
