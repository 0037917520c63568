"""A. Data is never lost or corrupted: baselines, reports and ``--out`` folders are written whole or
not at all, onto what the user named (a symlink's target, a device, a FIFO), and only when complete."""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
import threading

import pytest

from tests.helpers import example
from tests.reliability.conftest import assert_clean, graphtool_env, write

BREAK_MODEL = """
import torch


def f(x):
    y = x * 2
    print("mid")
    return y + 1


model = f
example_inputs = (torch.randn(3),)
"""

FAILING = {
    "raises": "import torch\n\nraise RuntimeError('broken on purpose')\n",
    "hard_exit": "import os\n\nos._exit(3)\n",
    "crash": "import ctypes\n\nctypes.string_at(0)\n",
}


def _no_tmp_files(folder) -> list[str]:
    return [p.name for p in folder.rglob("*.tmp")]


# -- --update-baseline writes only a complete baseline ---------------------------------------------


@pytest.mark.slow  # over 8 s: the slow tier (docs/ci.md)
@pytest.mark.parametrize("kind", sorted(FAILING))
def test_update_baseline_keeps_the_old_file_when_a_model_cannot_be_linted(cli, tmp_path, kind):
    good = write(tmp_path / "m.py", BREAK_MODEL)
    bad = write(tmp_path / f"bad_{kind}.py", FAILING[kind])
    base = tmp_path / "gb.json"
    rc, _, _ = cli("lint", good, "--baseline", base, "--update-baseline")
    assert rc == 0
    before = base.read_bytes()
    rc, out, err = cli("lint", good, bad, "--baseline", base, "--update-baseline", "--format", "json")
    assert rc == 2
    assert base.read_bytes() == before  # byte for byte
    assert "gb.json not updated: 1 of 2 models could not be linted" in err and f"bad_{kind}.py" in err
    assert "the old file is unchanged" in err
    assert json.loads(out)["models"][1]["status"] == "error"
    assert _no_tmp_files(tmp_path) == []


# -- writes land on what the user named ------------------------------------------------------------


def test_write_atomic_follows_a_symlink_and_keeps_it(tmp_path):
    from graphtool.render.documents import write_atomic

    real = write(tmp_path / "store" / "report.json", "old")
    link = tmp_path / "latest.json"
    link.symlink_to(real)
    write_atomic(link, "new")
    assert link.is_symlink() and os.readlink(link) == str(real)
    assert real.read_text() == "new"
    dangling = tmp_path / "later.json"
    dangling.symlink_to(tmp_path / "store" / "not-yet.json")
    write_atomic(dangling, "made")
    assert dangling.is_symlink() and (tmp_path / "store" / "not-yet.json").read_text() == "made"
    assert _no_tmp_files(tmp_path) == []


def test_write_atomic_streams_to_devices_and_fifos(tmp_path):
    from graphtool.render.documents import write_atomic

    write_atomic("/dev/null", "nothing")  # needs no permission to replace /dev: it is written, not renamed over
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode)
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    got = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_text()))
    reader.start()
    write_atomic(fifo, "through the pipe")
    reader.join(10)
    assert got == ["through the pipe"] and stat.S_ISFIFO(os.stat(fifo).st_mode)


def test_write_atomic_keeps_the_file_mode_and_leaves_nothing_on_failure(tmp_path, monkeypatch):
    from graphtool.render import documents

    target = write(tmp_path / "r.json", "old")
    target.chmod(0o640)
    documents.write_atomic(target, "new")
    assert stat.S_IMODE(target.stat().st_mode) == 0o640 and target.read_text() == "new"

    def interrupted(src, dst):
        raise KeyboardInterrupt  # what SIGTERM becomes under the CLI

    monkeypatch.setattr(documents.os, "replace", interrupted)
    with pytest.raises(KeyboardInterrupt):
        documents.write_atomic(target, "newer")
    assert target.read_text() == "new" and _no_tmp_files(tmp_path) == []


@pytest.mark.slow  # over 6 s: the slow tier (docs/ci.md)
def test_cli_outputs_onto_dev_null_and_a_symlink(cli, tmp_path):
    real = write(tmp_path / "reports" / "lint.json", "{}")
    link = tmp_path / "lint.json"
    link.symlink_to(real)
    rc, _, err = cli("lint", example("mlp.py"), "--format", "json", "--output", link)
    assert rc == 0, err
    assert link.is_symlink() and json.loads(real.read_text())["passed"] is True
    rc, _, err = cli("lint", example("mlp.py"), "--format", "sarif", "--output", "/dev/null")
    assert rc == 0, err
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode)


SIGNAL_MID_WRITE = """
import os, signal, sys
from graphtool.cli.main import run

real_replace = os.replace


def replace_then_die(src, dst):
    if str(dst).endswith("report.json"):
        os.kill(os.getpid(), signal.SIGTERM)  # arrives between writing the temporary file and renaming it
    return real_replace(src, dst)


os.replace = replace_then_die
sys.exit(run(["trace", sys.argv[1], "--format", "json", "--out", sys.argv[2]]))
"""


@pytest.mark.slow  # over 6 s: the slow tier (docs/ci.md)
def test_sigterm_in_the_middle_of_a_write_leaves_no_temporary_file(tmp_path):
    out = tmp_path / "traced"
    write(out / "report.json", "old report")
    script = write(tmp_path / "run.py", SIGNAL_MID_WRITE)
    proc = subprocess.run([sys.executable, str(script), example("mlp.py"), str(out)], capture_output=True, text=True,
                          env=graphtool_env(), timeout=300)
    assert proc.returncode == 128 + signal.SIGTERM, proc.stderr
    assert "graphtool: terminated by SIGTERM" in proc.stderr
    assert_clean(proc.stderr)
    assert (out / "report.json").read_text() == "old report"
    assert sorted(p.name for p in out.iterdir() if p.name.startswith(".")) == []


# -- trace --out: the folder holds one run ----------------------------------------------------------


def test_trace_out_removes_its_own_earlier_files_and_nothing_else(cli, tmp_path):
    out = tmp_path / "traced"
    mark = "# forward graph of region 1 of /old/model.py (generated by graphtool)\n"
    write(out / "forward_region1.py", mark + "def forward(): ...\n")
    write(out / "backward_region1.py", mark.replace("forward", "backward") + "def backward(): ...\n")
    write(out / "forward_region2.py", "# my own notes, not graphtool's\n")
    write(out / "notes.txt", "keep me")
    write(out / "report.json", '{"graphtool_version": "0", "schema_version": 1}')
    rc, _, err = cli("trace", example("mlp.py"), "--format", "json", "--out", out)
    assert rc == 0, err
    names = sorted(p.name for p in out.iterdir())
    assert names == ["backward.py", "forward.py", "forward_region2.py", "notes.txt", "report.json"]
    assert json.loads((out / "report.json").read_text())["model"]["path"].endswith("mlp.py")
    assert (out / "forward_region2.py").read_text() == "# my own notes, not graphtool's\n"


def test_trace_out_removes_the_folders_of_models_an_earlier_run_described(cli, tmp_path):
    """Stale outputs: a config run wrote one folder per model; a later one-model run into the same
    folder left them, so the folder described models that were not traced. graphtool's own folders
    go; a folder holding a file of the user's keeps that file; a folder graphtool did not write stays."""
    out = tmp_path / "traced"
    mark = "# forward graph of region 0 of /old/model.py (generated by graphtool)\n"
    report = '{"graphtool_version": "0", "schema_version": 1}'
    for sub in ("old_model", "mixed"):
        write(out / sub / "forward.py", mark + "def forward(): ...\n")
        write(out / sub / "report.json", report)
    write(out / "mixed" / "notes.txt", "keep me")
    write(out / "mine" / "forward.py", mark + "def forward(): ...\n")  # no report.json: not graphtool's folder
    rc, _, err = cli("trace", example("mlp.py"), "--format", "json", "--out", out)
    assert rc == 0, err
    assert sorted(p.name for p in out.iterdir()) == ["backward.py", "forward.py", "mine", "mixed", "report.json"]
    assert [p.name for p in (out / "mixed").iterdir()] == ["notes.txt"]
    assert (out / "mine" / "forward.py").read_text().startswith(mark)


# -- baseline keys do not depend on the current folder -------------------------------------------------


@pytest.mark.slow  # over 8 s: the slow tier (docs/ci.md)
def test_baseline_means_the_same_from_any_folder(cli, tmp_path, monkeypatch):
    project = tmp_path / "project"
    write(project / "models" / "m.py", BREAK_MODEL)
    (project / "sub").mkdir()
    monkeypatch.chdir(project)
    rc, _, err = cli("lint", "models/m.py", "--baseline", "ci/gb.json", "--update-baseline")
    assert rc == 0, err
    data = json.loads((project / "ci" / "gb.json").read_text())
    assert data["version"] == 2 and data["breaks"][0]["model"] == "../models/m.py"
    for folder, model, base in [
        (project / "sub", "../models/m.py", "../ci/gb.json"),
        (tmp_path, "project/models/m.py", "project/ci/gb.json"),
        (project / "ci", "../models/m.py", "gb.json"),
    ]:
        monkeypatch.chdir(folder)
        rc, out, err = cli("lint", model, "--baseline", base, "--format", "json")
        m = json.loads(out)["models"][0]
        assert rc == 0, (folder, err)
        assert [b["new"] for b in m["breaks"]] == [False] and m["fixed_breaks"] == []


def test_version_1_baselines_are_still_read_against_the_current_folder(cli, tmp_path, monkeypatch):
    write(tmp_path / "m.py", BREAK_MODEL)
    write(tmp_path / "old" / "gb.json", json.dumps({"version": 1, "breaks": [{
        "model": "m.py", "file": "m.py", "kind": "gb0059", "source_text": 'print("mid")', "line": 6,
        "reason": "Failed to trace builtin operator"}]}))
    monkeypatch.chdir(tmp_path)
    rc, out, err = cli("lint", "m.py", "--baseline", "old/gb.json", "--format", "json")
    assert rc == 0, err
    assert [b["new"] for b in json.loads(out)["models"][0]["breaks"]] == [False]


# -- os.chdir() in the user's script does not move outputs -----------------------------------------


CHDIR_AT_IMPORT = """
import os

import torch

os.chdir({elsewhere!r})

model = torch.nn.Linear(4, 4)
example_inputs = (torch.randn(2, 4),)
"""


@pytest.mark.slow  # over 5 s: the slow tier (docs/ci.md)
def test_outputs_stay_where_asked_when_the_script_changes_folder(cli, tmp_path, monkeypatch):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    here = tmp_path / "here"
    script = write(here / "m.py", CHDIR_AT_IMPORT.format(elsewhere=str(elsewhere)))
    monkeypatch.chdir(here)
    rc, _, err = cli("trace", "m.py", "--format", "json", "--out", "traced")
    assert rc == 0, err
    assert (here / "traced" / "report.json").is_file() and "wrote 3 files to traced" in err
    rc, _, err = cli("lint", "m.py", "--format", "json", "--output", "lint.json", "--baseline", "gb.json", "--update-baseline")
    assert rc == 0, err
    assert (here / "lint.json").is_file() and (here / "gb.json").is_file()
    rc, _, err = cli("render", "m.py", "-o", "pic.dot")
    assert rc == 0, err
    assert (here / "pic.dot").is_file()
    assert list(elsewhere.iterdir()) == [] and os.getcwd() == str(here) and script.is_file()


def test_render_writes_through_a_symlink_and_into_a_fifo(cli, tmp_path):
    real = tmp_path / "pictures" / "real.svg"
    real.parent.mkdir()
    link = tmp_path / "latest.svg"
    link.symlink_to(real)
    rc, _, err = cli("render", example("mlp.py"), "-o", link)
    assert rc == 0, err
    assert link.is_symlink() and real.read_text().lstrip().startswith("<?xml")
    fifo = tmp_path / "picture.svg"
    os.mkfifo(fifo)
    got = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_bytes()))
    reader.start()
    rc, _, err = cli("render", example("mlp.py"), "-o", fifo, "--format", "svg")
    reader.join(30)
    assert rc == 0, err
    assert stat.S_ISFIFO(os.stat(fifo).st_mode) and b"<svg" in got[0]
    assert _no_tmp_files(tmp_path) == []
