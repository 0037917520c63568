"""Run jobs in child processes, ``jobs`` at a time, each with its own timeout.

A job that crashes the interpreter, hangs or raises becomes an error result for that job alone;
every job asked for comes back, in the order asked. What a child prints (the user's script's own
``print``, its warnings) comes out on graphtool's stderr as it is printed, never on stdout.
"""

from __future__ import annotations

import codecs
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from graphtool.errors import stop_deferred


@dataclass
class _Running:
    index: int
    proc: subprocess.Popen
    result_path: Path
    started: float
    output: _Pump
    result_seen: float | None = None  # when the result file was first seen while the child still ran


def run_jobs(
    jobs: list[dict],
    *,
    worker: str,
    parallel: int = 1,
    timeout: float | None = None,
    on_done: Callable[[int, dict], None] | None = None,
    on_tick: Callable[[], None] | None = None,
    poll: float = 0.05,
    grace: float = 1.0,
) -> list[dict]:
    """Run each job with ``python -m WORKER JOB.json RESULT.json``; return their results in order.

    Each child leads its own process group, and the whole group is killed on every way out: when the
    child is done (a subprocess the user's code started goes with it), when it times out, and when
    graphtool itself stops (an exception, Ctrl-C, SIGTERM); the temporary folder goes too. A child
    that wrote its result but does not exit (a non-daemon thread the user's code started) is
    killed ``grace`` seconds later, its result kept. ``on_tick`` is called every ``poll`` seconds while
    children run (``graphtool compile`` reads a child's progress from its files there).

    Jobs and results are JSON dicts here; :mod:`graphtool.capture.processes.lint_job` gives them types."""
    results: list[dict | None] = [None] * len(jobs)
    pending = list(enumerate(jobs))
    running: list[_Running] = []
    with tempfile.TemporaryDirectory(prefix="graphtool-lint-", ignore_cleanup_errors=True) as tmp:
        tmpdir = Path(tmp)
        try:
            while pending or running:
                while pending and len(running) < max(1, parallel):
                    index, job = pending.pop(0)
                    _start(index, job, tmpdir, worker, running)
                time.sleep(poll)  # children are polled, never reaped early: see _exited
                if on_tick:
                    on_tick()
                for r in list(running):
                    elapsed = time.perf_counter() - r.started
                    if not _exited(r.proc):
                        if timeout and elapsed > timeout:
                            result = {"ok": False, "error": f"timed out after {timeout:g} s", "exit_code": 2}
                        elif _result_lingers(r, grace):
                            result = _read_result(r)
                        else:
                            continue
                        _kill(r.proc)
                        r.output.join(timeout=1.0)
                    else:
                        _kill(r.proc)  # the child is done: whatever it left running in its group goes too
                        # the group is killed: the pipe ends once its last bytes are read, before the report prints
                        r.output.join(timeout=1.0)
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


def _exited(proc: subprocess.Popen) -> bool:
    """Whether the child has exited, leaving it unreaped (a zombie keeps its pid, so its process
    group id cannot be reused before :func:`_kill` has killed the group)."""
    if proc.returncode is not None:
        return True
    if not hasattr(os, "waitid"):
        return proc.poll() is not None
    try:
        info = os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
    except ChildProcessError:
        return proc.poll() is not None
    return info is not None and info.si_pid == proc.pid


def _result_lingers(r: _Running, grace: float) -> bool:
    """The child wrote its result ``grace`` seconds ago or more and is still running."""
    if r.result_seen is None:
        if not r.result_path.exists():
            return False
        r.result_seen = time.perf_counter()
    return time.perf_counter() - r.result_seen >= grace


class _Pump(threading.Thread):
    """Copies a child's output (stdout and stderr, one pipe) to graphtool's stderr as it comes, keeping
    its last few KiB for the error of a child that dies without a result. ``sys.stderr`` is looked up
    at each write: a rich progress display on the terminal redirects it and prints the lines above itself."""

    KEEP = 4096

    def __init__(self, stream):
        super().__init__(daemon=True)  # a grandchild that escaped the group may hold the pipe open
        self.stream = stream
        self.tail = ""

    def run(self) -> None:
        decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        with self.stream:
            while chunk := self.stream.read1(65536):
                text = decoder.decode(chunk)
                self.tail = (self.tail + text)[-self.KEEP:]
                try:
                    sys.stderr.write(text)
                    sys.stderr.flush()
                except (OSError, ValueError):  # graphtool's own stderr is gone (a closed pipe): keep the tail
                    pass


def _start(index: int, job: dict, tmpdir: Path, worker: str, running: list[_Running]) -> None:
    """Start a child and add it to ``running`` with no moment between where a signal could lose it."""
    job_path = tmpdir / f"job{index}.json"
    result_path = tmpdir / f"result{index}.json"
    job_path.write_text(json.dumps(job))
    with stop_deferred():
        proc = subprocess.Popen(
            [sys.executable, "-m", worker, str(job_path), str(result_path)],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group: killed whole, and not by the terminal's Ctrl-C
            cwd=job.get("cwd") or os.getcwd(),
        )
        output = _Pump(proc.stdout)
        output.start()
        running.append(_Running(index, proc, result_path, time.perf_counter(), output))


def _read_result(r: _Running) -> dict:
    try:
        return json.loads(r.result_path.read_text())
    except (OSError, ValueError) as exc:
        return {"ok": False, "error": f"the child's result could not be read: {exc}", "exit_code": 3}


def _collect(r: _Running) -> dict:
    if r.result_path.exists():
        return _read_result(r)
    code = r.proc.returncode
    tail = r.output.tail[-1500:]
    if code is not None and code < 0:
        error = f"the interpreter crashed: it was killed by signal {-code} ({_signal_name(-code)})"
    else:
        # os._exit() (or sys.exit in an atexit hook, a C extension's exit()) before graphtool could report
        error = (f"the process exited with status {code} before graphtool could report anything: the script "
                 "ended the interpreter itself (os._exit(), or exit() from C code)")
    return {"ok": False, "error": error, "detail": tail.strip() or None, "exit_code": 2}


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def _kill(proc: subprocess.Popen) -> None:
    """Kill the child's whole process group, then reap the child."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    proc.wait()
