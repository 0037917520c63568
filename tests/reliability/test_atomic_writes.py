"""A. Data is never lost or corrupted, at scale: every file graphtool writes goes to a temporary file in the
same folder and is renamed over its name, so a process killed at any moment (SIGKILL: the OOM killer, a CI
runner's hard cancel, which no handler sees) leaves the old file or the new one, never a torn one.

The audit runs each command in this process under a Python audit hook (``sys.addaudithook``) rather than
under strace: the commands share this process's torch import and warm caches (strace would need a fresh
process per command, and a package), and the hook sees what graphtool itself does: every ``open`` with its
flags, every ``os.rename``/``os.replace``, every program started (Graphviz writes the temporary name it
is handed, so the final path must never be on a program's command line). What the hook cannot see (a C
extension opening a file itself) never holds a graphtool output path. The hook stays installed for the
rest of the process (audit hooks cannot be removed) but only records inside :func:`audited`.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import example
from tests.log.recorded import DDP_213
from tests.reliability.conftest import graphtool_env, write

_WRITING = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND
_EVENTS: list | None = None  # recording while a list
_HOOKED = False


def _hook(event: str, args: tuple) -> None:
    if _EVENTS is not None and event in ("open", "os.rename", "subprocess.Popen", "shutil.copyfile", "os.truncate"):
        _EVENTS.append((event, args))


@contextlib.contextmanager
def audited():
    """Record the file events of the block: ``with audited() as events: ...``."""
    global _EVENTS, _HOOKED
    if not _HOOKED:
        sys.addaudithook(_hook)
        _HOOKED = True
    _EVENTS = events = []
    try:
        yield events
    finally:
        _EVENTS = None


def _real(path) -> str:
    return os.path.realpath(os.fspath(path))


def assert_written_whole(events: list, path: Path) -> None:
    """``path`` was never opened for writing, copied onto, truncated, or handed to a program: it appeared by
    a rename from a temporary file in its own folder."""
    final = _real(path)
    for event, args in events:
        if event == "open" and isinstance(args[0], (str, bytes, os.PathLike)) and _real(args[0]) == final:
            mode, flags = args[1], args[2]
            assert not (flags & _WRITING or (mode and set(mode) & set("wax+"))), f"{path} opened for writing: {args}"
        elif event in ("shutil.copyfile", "os.truncate"):
            assert _real(args[-1] if event == "shutil.copyfile" else args[0]) != final, f"{event} onto {path}"
        elif event == "subprocess.Popen":
            assert final not in {_real(a) for a in args[1] if isinstance(a, str) and os.sep in a}, f"{path} handed to {args[1]}"
    renames = [args for event, args in events if event == "os.rename" and _real(args[1]) == final]
    assert renames, f"{path} was not renamed into place"
    assert all(os.path.dirname(_real(src)) == os.path.dirname(final) for src, *_ in renames), renames


def assert_only_temporary_names_written(events: list, folder: Path) -> None:
    """Whatever write site a command has (one this file does not name included), under ``folder`` it only
    ever opened a temporary name for writing."""
    for event, args in events:
        if event != "open" or not isinstance(args[0], (str, os.PathLike)) or not _real(args[0]).startswith(_real(folder) + os.sep):
            continue
        if args[2] & _WRITING or (args[1] and set(args[1]) & set("wax+")):
            assert Path(args[0]).name.endswith(".tmp"), f"{args[0]} opened for writing in place"


def _old(*paths: Path) -> None:
    for p in paths:
        write(p, "old content\n")


@pytest.mark.slow  # a report, a trace, three pictures and a lint child of examples/mlp.py (docs/ci.md)
def test_every_output_of_every_command_is_renamed_into_place(cli, tmp_path):
    import graphtool
    from graphtool.cli.lint import _emit

    out = tmp_path / "out"
    page, svg, png, dot = out / "mlp-report.html", out / "g.svg", out / "g.png", out / "g.dot"
    traced = out / "traced"
    trace_files = [traced / "forward.py", traced / "backward.py", traced / "report.json"]
    lint_json, baseline = out / "lint.json", out / "gb.json"
    formats = {fmt: out / f"lint.{fmt}" for fmt in ("sarif", "junit", "github", "html", "table")}
    saved = out / "saved.html"
    log_page, diff_page = out / "log.html", out / "diff.html"
    _old(page, svg, png, dot, *trace_files, lint_json, baseline, *formats.values(), saved, log_page, diff_page)
    write(baseline, '{"version": 2, "breaks": []}\n')

    commands = [
        (("report", example("mlp.py"), "-o", page), [page]),
        (("render", example("mlp.py"), "-o", svg), [svg]),
        (("render", example("mlp.py"), "-o", png), [png]),
        (("render", example("mlp.py"), "--format", "dot", "-o", dot), [dot]),
        (("trace", example("mlp.py"), "--format", "json", "--out", traced), trace_files),
        (("lint", example("mlp.py"), "--format", "json", "-o", lint_json, "--baseline", baseline, "--update-baseline"),
         [lint_json, baseline]),
        (("log", DDP_213 / "trace", "-o", log_page), [log_page]),  # a recorded TORCH_TRACE folder, no torch run
        (("diff", traced / "report.json", traced / "report.json", "--format", "html", "-o", diff_page), [diff_page]),
    ]
    for argv, written in commands:
        with audited() as events:
            rc, _, err = cli(*argv)
        assert rc == 0, (argv, err)
        for path in written:
            assert_written_whole(events, path)
            assert path.read_bytes() != b"old content\n", path
        assert_only_temporary_names_written(events, out)

    # lint -o in every other format (the CLI's own writer, on one lint of the same model), and a Result's save()
    import torch

    outcome = graphtool.lint(torch.nn.Linear(4, 2), torch.randn(3, 4))
    for fmt, path in formats.items():
        with audited() as events:
            _emit(outcome, fmt, path)
        assert_written_whole(events, path)
    with audited() as events:
        outcome.save(saved)
    assert_written_whole(events, saved)
    assert_only_temporary_names_written(events, out)
    assert json.loads(lint_json.read_text())["passed"] is True and saved.read_text().startswith("<!DOCTYPE html>")
    assert sorted(p.name for p in out.rglob(".*")) == []  # no temporary file left behind


def test_the_pytest_plugins_baseline_is_renamed_into_place(tmp_path):
    from graphtool.pytest_plugin import _Baseline
    from tests.plugin.test_pytest_plugin import _checked

    path = tmp_path / "gb.json"
    write(path, '{"version": 2, "breaks": []}\n')
    state = _Baseline(path, True, tmp_path)
    state.expected = {"test_m.py::test_a"}
    state.record("test_m.py::test_a", _checked(tmp_path, "test_m.py::test_a", 1))
    with audited() as events:
        said = state.finish(interrupted=False)
    assert said.endswith("gb.json updated: 1 graph break of 1 test")
    assert_written_whole(events, path)


# -- SIGKILL ---------------------------------------------------------------------------------------

#: a writer killed at one moment of a write: ``python -c KILLED POINT PATH [graphtool ARGS...]``; with
#: graphtool's arguments it runs the CLI, else it writes PATH itself through graphtool's writer
KILLED = r"""
import os, signal, sys
from pathlib import Path

point, path = sys.argv[1], os.path.realpath(sys.argv[2])
die = lambda: os.kill(os.getpid(), signal.SIGKILL)
tmp = os.path.join(os.path.dirname(path), "." + os.path.basename(path) + ".")


def hook(event, args):
    name = args[0] if args and isinstance(args[0], str) else ""
    if point == "open" and event == "open" and name.startswith(tmp):
        die()  # the temporary file is about to be created
    if point == "rename" and event == "os.rename" and os.path.realpath(args[1]) == path:
        die()  # the new file is whole, the rename not yet done


sys.addaudithook(hook)
if point == "mid-write":  # the first half of the bytes are on disk, the rest never come
    real_fdopen = os.fdopen

    class HalfThenDie:
        def __init__(self, fh):
            self.fh = fh

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

        def write(self, data):
            self.fh.write(data[: len(data) // 2])
            self.fh.flush()
            die()

    os.fdopen = lambda fd, mode, *a, **k: HalfThenDie(real_fdopen(fd, mode, *a, **k))
if len(sys.argv) > 3:
    from graphtool.cli.main import run

    sys.exit(run(sys.argv[3:]))
from graphtool.render.documents import write_atomic

write_atomic(Path(path), b"new " * (4 << 20))  # 16 MiB
"""


def _killed(point: str, path: Path, *graphtool_args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", KILLED, point, str(path), *map(str, graphtool_args)], capture_output=True,
                          env=graphtool_env(), timeout=300, stdin=subprocess.DEVNULL)


@pytest.mark.parametrize("old", [True, False], ids=["over-a-file", "new-file"])
def test_a_writer_killed_at_any_moment_leaves_the_old_file_or_the_new_one(tmp_path, old):
    path = tmp_path / "report.html"
    for point in ("open", "mid-write", "rename"):
        if old:
            write(path, "old content\n")
        proc = _killed(point, path)
        assert proc.returncode == -signal.SIGKILL, (point, proc.stderr)
        if old:
            assert path.read_text() == "old content\n", point
        else:
            assert not path.exists(), point
        leftovers = [p.name for p in tmp_path.iterdir() if p.name != "report.html"]
        assert all(n.startswith(".report.html.") and n.endswith(".tmp") for n in leftovers), leftovers  # SIGKILL cannot clean up
        for p in tmp_path.glob(".*.tmp"):
            p.unlink()
    proc = _killed("none", path)
    assert proc.returncode == 0, proc.stderr
    assert path.read_bytes() == b"new " * (4 << 20) and sorted(p.name for p in tmp_path.iterdir()) == ["report.html"]


@pytest.mark.slow  # two graphtool processes (docs/ci.md)
def test_a_graphtool_command_killed_mid_write_or_before_its_rename_leaves_the_old_file(tmp_path):
    out = tmp_path / "graph.dot"
    for point in ("mid-write", "rename"):
        write(out, "old content\n")
        proc = _killed(point, out, "render", example("mlp.py"), "--format", "dot", "-o", out)
        assert proc.returncode == -signal.SIGKILL, (point, proc.stderr.decode()[-2000:])
        assert out.read_text() == "old content\n", point
