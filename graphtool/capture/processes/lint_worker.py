"""Run one model or script under a recording torch.compile backend and collect what dynamo did.

This runs inside a child process started by :func:`graphtool.capture.processes.lint_job.run_lint_jobs`: a
model that crashes the interpreter, hangs or raises costs only its own lint. It reads a
:class:`LintJob` and writes a :class:`LintResult`; ``graphtool.analysis.lint`` judges it against budgets.

Breaks come from torch's structured trace (``dynamo_graph_break_reason``), never from
``torch._dynamo.explain`` whose count is ``graphs - 1``. Recompiles and skipped frames come from
``compilation_metrics`` events (skipped frames also from the break records that say so). Each is
reported at the user's own code: where torch names a library frame (``torch/_dynamo/external_utils.py``
for an ``nn.Sequential``, ``transformers/...``), the innermost user frame that led there, with the
library's place kept as ``library_file``/``library_line``. A run that compiled no graph says why
(:mod:`graphtool.capture.no_graph`).
"""

from __future__ import annotations

import contextlib
import json
import os
import runpy
import sys
import time
from dataclasses import replace
from pathlib import Path

from graphtool.capture import compat
from graphtool.capture.dynamic_inputs import run_variant
from graphtool.capture.graph_breaks import (
    BreakRecorder,
    StackFrame,
    at_user_code,
    guard_site,
    hit_recompile_limit,
    placed,
    quiet_torch_logs,
)
from graphtool.capture.no_graph import CompileSeen, no_graph_cause
from graphtool.capture.processes.lint_job import BreakRecord, FrameRecord, LintJob, LintResult
from graphtool.capture.stack_room import call_with_stack_room
from graphtool.capture.tracer import explain_failure
from graphtool.capture.user.boundary import running_user_code
from graphtool.capture.user.script import load_model
from graphtool.errors import GraphtoolError, ScriptNotFound, UsageError, UserCodeFailed
from graphtool.text import first_line


def _recording_backend(counter: list):
    def record(gm, example_inputs):
        counter.append(len(gm.graph.nodes))
        return gm.forward

    return record


class _Redirect:
    """What the ``lint --run`` redirect saw: its own function, the calls, and ``torch.compile`` at the end."""

    def __init__(self):
        self.patched = None
        self.found = None
        self.calls: list[dict] = []

    def seen(self) -> CompileSeen:
        disabled = sum(bool(kw.get("disable")) for kw in self.calls)
        return CompileSeen(expected=self.patched, found=self.found, calls=len(self.calls), disabled_calls=disabled)


@contextlib.contextmanager
def _redirected_compile(torch, backend):
    """Every ``torch.compile`` call (function, decorator, ``nn.Module.compile``) uses ``backend``."""
    original = torch.compile
    redirect = _Redirect()

    def patched(model=None, **kwargs):
        # the user's backend, mode and fullgraph are replaced: lint records every break instead
        redirect.calls.append(kwargs)
        dynamic, disable = kwargs.get("dynamic"), kwargs.get("disable", False)

        def wrap(m):
            return original(m, backend=backend, dynamic=dynamic, disable=disable)

        return wrap if model is None else wrap(model)

    redirect.patched = torch.compile = patched
    try:
        yield redirect
    finally:
        redirect.found = torch.compile  # before restoring: a script that replaced it is a cause
        torch.compile = original


def lint_one(job: LintJob) -> LintResult:
    """Lint one model (``path``, ``entry``, ``dynamic``) or, with ``run``, one script."""
    torch = compat.import_torch()
    graphs: list[int] = []
    backend = _recording_backend(graphs)
    started = time.perf_counter()
    if job.reset:  # a fresh child process has nothing compiled yet
        compat.dynamo_reset()
    original = torch.compile  # before the user's code runs: a script may replace it on import
    dynamic_failed = ran = coverage = None
    counted: dict = {}
    with quiet_torch_logs(not job.debug), BreakRecorder() as rec, contextlib.redirect_stdout(sys.stderr):
        if job.run:
            before = compat.capture_counters()
            seen, called_at = _run_script(torch, job.path, list(job.args), backend), None
            counted = compat.counters_since(before)
        else:
            with _session(job) as session:
                entry, factory_args = session.entry(job.path, job.entry)
                spec = load_model(job.path, entry=entry, factory_args=factory_args)
                compiled = torch.compile(spec.model, backend=backend)
                session.use_backend(backend)
                dynamic_failed, ran = _run_model(spec, session.wrap(compiled, spec), compiled, job, rec, graphs, counted)
            if job.coverage and job.ddp is None and job.fsdp2 is None:
                mark = rec.mark()  # its compiles are not lint's: what they record is forgotten
                coverage = _coverage(spec)
                rec.rewind(mark)
            seen = CompileSeen(expected=original, found=torch.compile)
            # graphtool makes the call on the user's behalf: the script's example inputs stand for the call site
            called_at = StackFrame(str(Path(spec.path).resolve()), spec.line, spec.entry) if spec.line else None
        result = _result(rec, graphs, time.perf_counter() - started, called_at)
        if not graphs:
            result = replace(result, no_graph=no_graph_cause(rec, seen))
        if ran is not None:
            result = replace(result, schedule=ran)
        result = replace(result, counters=counted or None, coverage=coverage)
    if dynamic_failed is not None:
        result = _beside(result, dynamic_failed)
    return result


def _beside(result: LintResult, err: GraphtoolError) -> LintResult:
    """``result`` (what the example inputs' run found, kept) with the ``--dynamic`` run's failure said beside it."""
    return replace(result, error=error_text(err), detail=err.detail, exit_code=err.exit_code)


def error_text(err: GraphtoolError) -> str:
    """An error as lint reports it; the hint travels in the message, so a missing package's install
    line reaches lint's report too."""
    return f"{err.message} (hint: {err.hint})" if err.hint else err.message


def _session(job: LintJob):
    """The job's launch, opened before the script is imported: ``--ddp``, torch's fake process group and DDP's
    optimizer on; ``--fsdp2``, a fake process group of the job's world size (FSDP2 applied by the session's
    ``wrap``); else the model alone."""
    from graphtool.capture.distributed.ddp import Alone, DdpSession

    if job.fsdp2 is not None:
        from graphtool.capture.distributed.fsdp2 import Fsdp2Session

        return Fsdp2Session(world_size=job.fsdp2)
    if job.ddp is not None:
        return DdpSession(world_size=job.ddp[0], bucket_cap_mb=job.ddp[1], quiet=not job.debug)
    return Alone()


def _run_model(spec, runner, compiled, job: LintJob, rec: BreakRecorder, graphs: list,
               counted: dict) -> tuple[GraphtoolError | None, dict | None]:
    """Run the example inputs (their failure raises; ``counted`` gets dynamo's counters for that one call), then
    with ``--schedule`` each step of the script's schedule (a step's failure raises, naming the step), then with
    ``--dynamic`` the other size: its failure is returned, so what the first run found is still reported, with what
    the schedule's run did (``steps``, ``source``, ``left_out``)."""
    before = compat.capture_counters()
    try:
        runner(*spec.args, **spec.kwargs)
    except Exception as exc:
        raise explain_failure(spec, exc) from None
    counted.update(compat.counters_since(before))
    ran = _run_schedule(spec, runner) if job.schedule else None
    return (_run_variant(spec, compiled, rec, graphs) if job.dynamic else None), ran


def _coverage(spec) -> dict:
    """``--coverage``: the model's capture coverage (graphtool.capture.coverage), after lint's own run."""
    from dataclasses import asdict

    from graphtool.capture.coverage import measure_coverage

    try:
        return asdict(measure_coverage(spec.model, spec.args, spec.kwargs))
    except Exception as exc:
        raise explain_failure(spec, exc) from None


def _run_schedule(spec, runner) -> dict:
    """Each step the script's ``get_input_schedule()`` yields, bounded as ``graphtool shapes`` bounds it, run through
    the compiled model as a loop would: the recompiles and the recompile limit are torch's own."""
    from graphtool.capture.schedule import DEFAULT_MAX_STEPS, script_schedule

    schedule = script_schedule(spec, max_steps=DEFAULT_MAX_STEPS)
    if schedule is None:
        raise UsageError(f"{spec.path}: --schedule: the script has no get_input_schedule()",
                         hint="define get_input_schedule() yielding the model's inputs for each step of the loop "
                              "(graphtool shapes reads the same function)")
    for step, (args, kwargs) in enumerate(schedule.steps, start=1):
        try:
            runner(*args, **kwargs)
        except Exception as exc:
            err = explain_failure(spec, exc)
            err.message = f"step {step} of the schedule ({schedule.source}): {err.message}"
            err.args = (err.message,)
            raise err from None
    return {"steps": len(schedule.steps), "source": schedule.source, "left_out": schedule.left_out}


def _run_variant(spec, compiled, rec: BreakRecorder, graphs: list) -> GraphtoolError | None:
    """The other size's run; when it fails, what it recorded is forgotten (the frame its error made dynamo
    skip, a recompile half done) and the failure returned."""
    mark, compiled_before = rec.mark(), len(graphs)
    try:
        run_variant(spec, compiled)
    except Exception as exc:  # a model that does not take the varied sizes is told how to declare them
        rec.rewind(mark)
        del graphs[compiled_before:]
        return explain_failure(spec, exc)
    return None


def lint_spec(spec, *, calls: list | None = None, dynamic: bool = False, debug: bool = False,
              coverage: bool = False) -> LintResult:
    """Lint a model in this process (``graphtool.lint(model, x)``): torch's compiled frames are reset
    first, then the model runs under the recording backend once, or once per ``calls`` entry (each a
    tuple of positional arguments: a training loop's steps, whose recompiles are what it counts);
    ``coverage``: its capture coverage measured after, as the lint child measures it.

    >>> import torch
    >>> from graphtool.capture.model_object import object_spec
    >>> lint_spec(object_spec(torch.nn.Linear(2, 2), (torch.ones(1, 2),))).graph_count
    1
    """
    torch = compat.import_torch()
    graphs: list[int] = []
    started = time.perf_counter()
    compat.dynamo_reset()
    original = torch.compile
    with quiet_torch_logs(not debug), BreakRecorder() as rec, contextlib.redirect_stdout(sys.stderr):
        compiled = torch.compile(spec.model, backend=_recording_backend(graphs))
        counted: dict = {}
        try:
            for step, args in enumerate(calls if calls is not None else [spec.args]):
                before = compat.capture_counters()
                compiled(*args, **spec.kwargs)
                if step == 0:  # dynamo's counters for one compiled call: the first
                    counted = compat.counters_since(before)
        except Exception as exc:
            raise explain_failure(spec, exc) from None
        dynamic_failed = _run_variant(spec, compiled, rec, graphs) if dynamic else None
        called_at = StackFrame(str(Path(spec.path).resolve()), spec.line, spec.entry) if spec.line else None
        result = _result(rec, graphs, time.perf_counter() - started, called_at)
        if not graphs:
            result = replace(result, no_graph=no_graph_cause(rec, CompileSeen(expected=original, found=torch.compile)))
        result = replace(result, counters=counted or None)
        if dynamic_failed is not None:
            result = _beside(result, dynamic_failed)
    compat.dynamo_reset()  # the recording backend's frames are not the caller's
    if coverage:
        result = replace(result, coverage=_coverage(spec))
    return result


def _run_script(torch, script: str, args: list[str], backend) -> CompileSeen:
    path = Path(script)
    if not path.is_file():
        raise ScriptNotFound(f"{path}: no such file")
    old_argv, old_path, old_stderr = sys.argv, list(sys.path), sys.stderr
    sys.argv = [str(path), *args]
    sys.path.insert(0, str(path.resolve().parent))
    said = sys.stderr = _Tail(old_stderr)
    try:
        with running_user_code(f"{path.name} raised", where=str(path)), _redirected_compile(torch, backend) as redirect:
            try:
                runpy.run_path(str(path), run_name="__main__")
            except SystemExit as exc:
                if exc.code not in (None, 0):
                    last = said.last_line()  # argparse's "error: unrecognized arguments: --bogus", say
                    raise UserCodeFailed(f"{path}: the script exited with status {exc.code}" + (f": {last}" if last else ""),
                                         detail=said.text().rstrip() or None) from None
            except SyntaxError as exc:
                raise UserCodeFailed(f"{exc.filename}:{exc.lineno}: syntax error: {exc.msg}") from None
    finally:
        sys.argv, sys.path[:] = old_argv, old_path
        if sys.stderr is said:
            sys.stderr = old_stderr
    return redirect.seen()


class _Tail:
    """stderr as a script under ``lint --run`` sees it: written through, the last few KiB kept, so a
    script that exits with an error (argparse rejecting an argument) is reported with its own words."""

    KEEP = 4096

    def __init__(self, stream):
        self._stream = stream
        self._kept = ""

    def write(self, text: str) -> int:
        self._kept = (self._kept + text)[-self.KEEP:]
        return self._stream.write(text)

    def text(self) -> str:
        return self._kept

    def last_line(self) -> str | None:
        lines = [ln.strip() for ln in self._kept.splitlines() if ln.strip()]
        return lines[-1] if lines else None

    def __getattr__(self, name):
        return getattr(self._stream, name)


def _result(rec: BreakRecorder, graphs: list[int], seconds: float, called_at: StackFrame | None = None) -> LintResult:
    """The recorder's events as records at the user's own code (``called_at``: where no user frame
    is on the stack, the place that stands for the user's call)."""
    sites: dict[tuple, list[BreakRecord]] = {}
    for b in rec.breaks:
        # a break with no user frame on its stack (a library model's own code) stays at the library line that
        # broke: ``called_at``, the factory's def line, never led to it and names no line worth reading
        r = placed(b)
        # the library place is part of the site: two breaks under one user call stay two
        sites.setdefault((r.file, r.line, r.reason, r.library_file, r.library_line), []).append(r)
    breaks = tuple(replace(same[0], occurrences=len(same)) for same in sites.values())
    recompiles = tuple(
        _frame_record(f.co_name, f.co_filename, f.co_firstlineno, f.recompile_reason, f.stack, called_at, guarded=True)
        for f in rec.frames if f.recompile_reason
    )
    skipped = tuple(
        replace(_frame_record(s.function, s.file, s.line, s.reason, s.stack, called_at), break_file=s.break_file, break_line=s.break_line)
        for s in rec.skipped_frames()
    )
    limit = next((f.fail_reason for f in rec.frames if f.fail_type and hit_recompile_limit(f.fail_reason)), None)
    return LintResult(ok=True, graph_count=len(graphs), breaks=breaks, recompiles=recompiles, skipped_frames=skipped,
                      seconds=round(seconds, 3), limit_hit=first_line(limit) if limit else None)


def _frame_record(function, file, line, reason, stack, called_at: StackFrame | None, *, guarded: bool = False) -> FrameRecord:
    """A recompile (``guarded``) sits where the failed guard's value is used, when torch names that line: the frame
    resuming after a graph break begins at the break's line, yet it guards a value its own code reads later."""
    site = guard_site(reason) if guarded else None
    if site is not None:
        file, line = site
    file, line, library_file, library_line = at_user_code(file, line, stack, called_at)
    return FrameRecord(function, file, line, reason, library_file=library_file, library_line=library_line)


def main(argv: list[str]) -> int:
    """Child-process entry point: read the job, write the result (or the error) as JSON."""
    job_path, result_path = argv
    job = LintJob.from_dict(json.loads(Path(job_path).read_text()))
    compat.import_torch()
    compat.freeze_gc_after_import()
    try:
        result = call_with_stack_room(lint_one, job)
    except GraphtoolError as err:
        result = LintResult.failed(error_text(err), err.detail, err.exit_code)
    except Exception as exc:
        import traceback

        result = LintResult.failed(f"internal error in graphtool: {type(exc).__name__}: {exc}",
                                   traceback.format_exc(), exit_code=3)
    tmp = result_path + ".tmp"
    Path(tmp).write_text(json.dumps(result.to_dict(), default=str))
    os.replace(tmp, result_path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
