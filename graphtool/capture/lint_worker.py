"""Run one model or script under a recording torch.compile backend and collect what dynamo did.

This runs inside a child process started by :func:`graphtool.capture.lint_job.run_lint_jobs`: a
model that crashes the interpreter, hangs or raises costs only its own lint. It reads a
:class:`LintJob` and writes a :class:`LintResult`; ``graphtool.analysis.lint`` judges it against budgets.

Breaks come from torch's structured trace (``dynamo_graph_break_reason``), never from
``torch._dynamo.explain`` whose count is ``graphs - 1``. Recompiles and skipped frames come from
``compilation_metrics`` events.
"""

from __future__ import annotations

import contextlib
import json
import linecache
import os
import runpy
import sys
import time
from pathlib import Path

from graphtool.capture import compat
from graphtool.capture.dynamic_inputs import dynamic_variant
from graphtool.capture.graph_breaks import BreakRecorder, quiet_torch_logs
from graphtool.capture.lint_job import BreakRecord, FrameRecord, LintJob, LintResult
from graphtool.capture.script import load_model
from graphtool.capture.tracer import explain_failure
from graphtool.capture.user_code import running_user_code
from graphtool.errors import GraphtoolError, ScriptNotFound, UserCodeFailed
from graphtool.text import first_line


def _recording_backend(counter: list):
    def record(gm, example_inputs):
        counter.append(len(gm.graph.nodes))
        return gm.forward

    return record


@contextlib.contextmanager
def _redirected_compile(torch, backend):
    """Every ``torch.compile`` call (function, decorator, ``nn.Module.compile``) uses ``backend``."""
    original = torch.compile

    def patched(model=None, **kwargs):
        # the user's backend, mode and fullgraph are replaced: lint records every break instead
        dynamic, disable = kwargs.get("dynamic"), kwargs.get("disable", False)

        def wrap(m):
            return original(m, backend=backend, dynamic=dynamic, disable=disable)

        return wrap if model is None else wrap(model)

    torch.compile = patched
    try:
        yield
    finally:
        torch.compile = original


def lint_one(job: LintJob) -> LintResult:
    """Lint one model (``path``, ``entry``, ``dynamic``) or, with ``run``, one script."""
    torch = compat.import_torch()
    graphs: list[int] = []
    backend = _recording_backend(graphs)
    started = time.perf_counter()
    if job.reset:  # a fresh child process has nothing compiled yet
        compat.dynamo_reset()
    with quiet_torch_logs(not job.debug), BreakRecorder() as rec, contextlib.redirect_stdout(sys.stderr):
        if job.run:
            _run_script(torch, job.path, list(job.args), backend)
        else:
            spec = load_model(job.path, entry=job.entry)
            compiled = torch.compile(spec.model, backend=backend)
            try:
                compiled(*spec.args, **spec.kwargs)
                if job.dynamic:
                    args, kwargs = dynamic_variant(spec)
                    compiled(*args, **kwargs)
            except Exception as exc:
                raise explain_failure(spec, exc) from None
    return _result(rec, graphs, time.perf_counter() - started)


def _run_script(torch, script: str, args: list[str], backend) -> None:
    path = Path(script)
    if not path.is_file():
        raise ScriptNotFound(f"{path}: no such file")
    old_argv, old_path = sys.argv, list(sys.path)
    sys.argv = [str(path), *args]
    sys.path.insert(0, str(path.resolve().parent))
    try:
        with running_user_code(f"{path.name} raised", where=str(path)), _redirected_compile(torch, backend):
            try:
                runpy.run_path(str(path), run_name="__main__")
            except SystemExit as exc:
                if exc.code not in (None, 0):
                    raise UserCodeFailed(f"{path}: the script exited with status {exc.code}") from None
            except SyntaxError as exc:
                raise UserCodeFailed(f"{exc.filename}:{exc.lineno}: syntax error: {exc.msg}") from None
    finally:
        sys.argv, sys.path[:] = old_argv, old_path


def _source_text(file: str | None, line: int | None) -> str | None:
    if not file or not line:
        return None
    text = linecache.getline(file, line).strip()
    return text or None


def _result(rec: BreakRecorder, graphs: list[int], seconds: float) -> LintResult:
    sites: dict[tuple, list] = {}
    for b in rec.breaks:
        sites.setdefault((b.file, b.line, b.reason), []).append(b)
    breaks = tuple(
        BreakRecord(reason=b.reason, code=b.code, file=b.file, line=b.line, source_text=_source_text(b.file, b.line),
                    hint=b.hint, occurrences=len(same))
        for same in sites.values() for b in same[:1]
    )
    recompiles = tuple(
        FrameRecord(f.co_name, f.co_filename, f.co_firstlineno, f.recompile_reason)
        for f in rec.frames if f.recompile_reason
    )
    skipped = tuple(
        FrameRecord(f.co_name, f.co_filename, f.co_firstlineno, first_line(f.fail_reason))
        for f in rec.frames if f.fail_type and f.fail_reason and "frame skipped" in f.fail_reason.lower()
    )
    return LintResult(ok=True, graph_count=len(graphs), breaks=breaks, recompiles=recompiles, skipped_frames=skipped,
                      seconds=round(seconds, 3))


def main(argv: list[str]) -> int:
    """Child-process entry point: read the job, write the result (or the error) as JSON."""
    job_path, result_path = argv
    job = LintJob.from_dict(json.loads(Path(job_path).read_text()))
    compat.import_torch()
    compat.freeze_gc_after_import()
    try:
        result = lint_one(job)
    except GraphtoolError as err:
        result = LintResult.failed(err.message, err.detail, err.exit_code)
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
