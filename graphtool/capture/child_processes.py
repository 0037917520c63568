"""Run jobs in child processes, ``jobs`` at a time, each with its own timeout.

A job that crashes the interpreter, hangs or raises becomes an error result for that job alone;
every job asked for comes back, in the order asked.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path


@dataclass
class _Running:
    index: int
    proc: subprocess.Popen
    result_path: Path
    started: float
    stderr_path: Path


def run_jobs(
    jobs: list[dict],
    *,
    worker: str,
    parallel: int = 1,
    timeout: float | None = None,
    on_done: Callable[[int, dict], None] | None = None,
    poll: float = 0.05,
) -> list[dict]:
    """Run each job with ``python -m WORKER JOB.json RESULT.json``; return their results in order.

    Jobs and results are JSON dicts here; :mod:`graphtool.capture.lint_job` gives them types."""
    results: list[dict | None] = [None] * len(jobs)
    pending = list(enumerate(jobs))
    running: list[_Running] = []
    with tempfile.TemporaryDirectory(prefix="graphtool-lint-") as tmp:
        tmpdir = Path(tmp)
        try:
            while pending or running:
                while pending and len(running) < max(1, parallel):
                    index, job = pending.pop(0)
                    running.append(_start(index, job, tmpdir, worker))
                _wait_any(running, timeout, poll)
                for r in list(running):
                    elapsed = time.perf_counter() - r.started
                    if r.proc.poll() is None and not (timeout and elapsed > timeout):
                        continue
                    if r.proc.poll() is None:
                        _kill(r.proc)
                        result = {"ok": False, "error": f"timed out after {timeout:g} s", "exit_code": 2}
                    else:
                        result = _collect(r)
                    result.setdefault("seconds", round(elapsed, 3))
                    results[r.index] = result
                    running.remove(r)
                    if on_done:
                        on_done(r.index, result)
        finally:
            for r in running:
                _kill(r.proc)
    return [r or {"ok": False, "error": "not run", "exit_code": 3} for r in results]


def _wait_any(running: list[_Running], timeout: float | None, poll: float) -> None:
    """Block until a child may have finished: on the child itself when only one runs."""
    if len(running) == 1:
        r = running[0]
        left = None if not timeout else max(0.0, timeout - (time.perf_counter() - r.started))
        try:
            r.proc.wait(timeout=left)
        except subprocess.TimeoutExpired:
            pass
        return
    time.sleep(poll)


def _start(index: int, job: dict, tmpdir: Path, worker: str) -> _Running:
    job_path = tmpdir / f"job{index}.json"
    result_path = tmpdir / f"result{index}.json"
    stderr_path = tmpdir / f"stderr{index}.txt"
    job_path.write_text(json.dumps(job))
    err = open(stderr_path, "wb")
    proc = subprocess.Popen(
        [sys.executable, "-m", worker, str(job_path), str(result_path)],
        stdin=subprocess.DEVNULL,
        stdout=err,
        stderr=err,
        start_new_session=True,
        cwd=job.get("cwd") or os.getcwd(),
    )
    err.close()
    return _Running(index, proc, result_path, time.perf_counter(), stderr_path)


def _collect(r: _Running) -> dict:
    if r.result_path.exists():
        return json.loads(r.result_path.read_text())
    code = r.proc.returncode
    tail = r.stderr_path.read_text(errors="replace")[-1500:] if r.stderr_path.exists() else ""
    how = f"was killed by signal {-code} ({signal.Signals(-code).name})" if code < 0 else f"exited with status {code}"
    return {"ok": False, "error": f"the interpreter crashed: it {how}", "detail": tail.strip() or None, "exit_code": 2}


def _kill(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    proc.wait()
