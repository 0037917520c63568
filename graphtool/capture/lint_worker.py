"""Run one model or script under a recording torch.compile backend and collect what dynamo did.

This runs inside a child process (``python -m graphtool.capture.lint_worker JOB.json RESULT.json``):
a model that crashes the interpreter, hangs or raises costs only its own lint. The result is a
plain JSON dict (see :func:`lint_one`); ``graphtool.analysis.lint`` judges it against budgets.

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
from typing import Any

from graphtool.capture import compat
from graphtool.capture.graph_breaks import BreakRecorder, quiet_torch_logs
from graphtool.errors import GraphtoolError


def _recording_backend(counter: list):
    def record(gm, example_inputs):
        counter.append(len(gm.graph.nodes))
        return gm.forward

    return record


def dynamic_variant(spec, to_device: str | None = None) -> tuple[tuple, dict]:
    """Inputs of another size for ``--dynamic``: the script's ``dynamic_inputs`` (and
    ``dynamic_kwargs``) if it defines them, else every tensor sharing the first tensor's batch size
    grown by one row (its first row repeated)."""
    import torch

    from graphtool.capture.tensors import iter_tensors, map_tensors

    module = sys.modules.get(getattr(spec, "module_name", "") or "")
    if module is not None and hasattr(module, "dynamic_inputs"):
        args = module.dynamic_inputs
        args = (args,) if isinstance(args, torch.Tensor) else tuple(args)
        kwargs = dict(getattr(module, "dynamic_kwargs", None) or spec.kwargs)
        if to_device:
            args, kwargs = map_tensors((args, kwargs), lambda t: t.detach().to(to_device).requires_grad_(t.requires_grad))
        return args, kwargs
    first = next(iter(iter_tensors((spec.args, spec.kwargs))), None)
    batch = first.shape[0] if first is not None and first.dim() > 0 else None

    def grow(t):
        if batch is not None and t.dim() > 0 and t.shape[0] == batch:
            return torch.cat([t.detach(), t.detach()[:1]]).requires_grad_(t.requires_grad)
        return t

    return map_tensors(spec.args, grow), map_tensors(spec.kwargs, grow)


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


def lint_one(job: dict) -> dict:
    """Lint one model (``{"path", "entry", "dynamic"}``) or script (``{"run", "args"}``)."""
    torch = compat.import_torch()
    from graphtool.capture.script import load_model
    from graphtool.capture.user_code import user_code_error

    graphs: list[int] = []
    backend = _recording_backend(graphs)
    started = time.perf_counter()
    if job.get("reset", False):  # a fresh child process has nothing compiled yet
        compat.dynamo_reset()
    with quiet_torch_logs(not job.get("debug")), BreakRecorder() as rec, contextlib.redirect_stdout(sys.stderr):
        if job.get("run"):
            _run_script(torch, job["run"], job.get("args", []), backend, user_code_error)
        else:
            spec = load_model(job["path"], entry=job.get("entry"))
            compiled = torch.compile(spec.model, backend=backend)
            try:
                compiled(*spec.args, **spec.kwargs)
                if job.get("dynamic"):
                    args, kwargs = dynamic_variant(spec)
                    compiled(*args, **kwargs)
            except Exception as exc:  # noqa: BLE001 - the user's model raised, or torch could not trace it
                from graphtool.capture.tracer import explain_failure

                raise explain_failure(spec, exc) from None
    return _result(rec, graphs, time.perf_counter() - started)


def _run_script(torch, script: str, args: list[str], backend, user_code_error) -> None:
    path = Path(script)
    if not path.is_file():
        from graphtool.errors import ScriptNotFound

        raise ScriptNotFound(f"{path}: no such file")
    old_argv, old_path = sys.argv, list(sys.path)
    sys.argv = [str(path), *args]
    sys.path.insert(0, str(path.resolve().parent))
    try:
        with _redirected_compile(torch, backend):
            runpy.run_path(str(path), run_name="__main__")
    except SystemExit as exc:
        if exc.code not in (None, 0):
            from graphtool.errors import UserCodeFailed

            raise UserCodeFailed(f"{path}: the script exited with status {exc.code}") from None
    except SyntaxError as exc:
        from graphtool.errors import UserCodeFailed

        raise UserCodeFailed(f"{exc.filename}:{exc.lineno}: syntax error: {exc.msg}") from None
    except Exception as exc:  # noqa: BLE001
        raise user_code_error(exc, f"{path.name} raised") from None
    finally:
        sys.argv, sys.path[:] = old_argv, old_path


def _source_text(file: str | None, line: int | None) -> str | None:
    if not file or not line:
        return None
    text = linecache.getline(file, line).strip()
    return text or None


def _result(rec: BreakRecorder, graphs: list[int], seconds: float) -> dict:
    breaks: dict[tuple, dict] = {}
    for b in rec.breaks:
        key = (b.file, b.line, b.reason)
        entry = breaks.setdefault(
            key,
            {
                "reason": b.reason,
                "code": b.code,
                "file": b.file,
                "line": b.line,
                "source_text": _source_text(b.file, b.line),
                "hint": b.hint,
                "occurrences": 0,
            },
        )
        entry["occurrences"] += 1
    recompiles = [
        {"function": f.co_name, "file": f.co_filename, "line": f.co_firstlineno, "reason": f.recompile_reason}
        for f in rec.frames
        if f.recompile_reason
    ]
    skipped = [
        {"function": f.co_name, "file": f.co_filename, "line": f.co_firstlineno, "reason": _first_line(f.fail_reason)}
        for f in rec.frames
        if f.fail_type and f.fail_reason and "frame skipped" in f.fail_reason.lower()
    ]
    return {
        "graph_count": len(graphs),
        "breaks": list(breaks.values()),
        "recompiles": recompiles,
        "skipped_frames": skipped,
        "seconds": round(seconds, 3),
    }


def _first_line(text: str | None) -> str | None:
    return (text or "").strip().splitlines()[0] if text and text.strip() else None


def main(argv: list[str]) -> int:
    """Child-process entry point: read the job, write the result (or the error) as JSON."""
    job_path, result_path = argv
    job = json.loads(Path(job_path).read_text())
    compat.import_torch()
    compat.freeze_gc_after_import()
    try:
        result: dict[str, Any] = {"ok": True, **lint_one(job)}
    except GraphtoolError as err:
        result = {"ok": False, "error": err.message, "detail": err.detail, "exit_code": err.exit_code}
    except Exception as exc:  # noqa: BLE001 - reported as this model's error by the parent
        import traceback

        result = {"ok": False, "error": f"internal error in graphtool: {type(exc).__name__}: {exc}",
                  "detail": traceback.format_exc(), "exit_code": 3}
    tmp = result_path + ".tmp"
    Path(tmp).write_text(json.dumps(result, default=str))
    os.replace(tmp, result_path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
