"""graphtool compile end to end: real children (dynamo only, ``--backend eager``, so each costs seconds, not a
C++ compile), the command's document, its exits and its clean-up. The phases against torch's own totals, the
repeated blocks against graphs compiled one by one and the regional ratio are in tests/truth/test_compile_truth.py."""

from __future__ import annotations

import json
import time
from importlib import resources
from pathlib import Path

import pytest

from graphtool.commands.compile import compile_model

pytestmark = pytest.mark.slow  # each run starts fresh processes that import torch (docs/ci.md)

FIXTURES = Path(__file__).parent.parent / "fixtures" / "compile"


@pytest.fixture(scope="module")
def near_miss():
    """One run shared by the tests below: the whole compile, the probe, and the regional child."""
    return compile_model(str(FIXTURES / "near_miss.py"), backend="eager", regional=True, steps=1)


def test_the_document_has_the_issues_names_and_follows_the_schema(near_miss):
    jsonschema = pytest.importorskip("jsonschema")
    doc = json.loads(json.dumps(near_miss.to_dict()))
    jsonschema.validate(doc, json.loads(resources.files("graphtool.schema").joinpath("compile.schema.json").read_text()))
    assert doc["backend"] == "eager" and doc["training"] is True and doc["caches"] == "off"
    assert doc["full"]["seconds"] > 0 and doc["full"]["step_seconds"] > 0 and doc["eager"]["step_seconds"] > 0
    assert [f["stage"] for f in doc["frames"]] == ["whole"]  # the probe's dynamo compiles are not the model's
    assert sum(doc["phases"].values()) == pytest.approx(doc["full"]["compile_seconds"], rel=1e-3)
    assert doc["phases"]["dynamo"] > 0.8 * doc["full"]["compile_seconds"]  # the eager backend: dynamo, nearly alone


def test_repeated_blocks_and_near_misses(near_miss):
    (block,) = near_miss.to_dict()["repeated_blocks"]
    assert (block["class"], block["fqns"], block["identical"]) == ("Block", [f"blocks.{i}" for i in range(4)], True)
    assert 0.5 < block["share"] < 0.8
    whys = [m["why"] for m in block["near_misses"]]
    assert whys[0] == "a flag read in forward: self.gate is True here, False in blocks.0"
    assert whys[1].startswith("a different config:")


def test_regional_compiles_the_identical_blocks_in_its_own_process(near_miss):
    doc = near_miss.to_dict()
    regional = doc["regional"]
    assert regional["blocks"] == [f"blocks.{i}" for i in range(4)]
    # a dynamo-only compile of four small blocks is about an eager step long: the wall-clock difference can be 0
    assert regional["seconds"] >= 0 and regional["compile_seconds"] > 0 and regional["step_seconds"] > 0
    assert regional["frames"] >= 1
    assert isinstance(regional["hazards"], list) and near_miss.exit_code() == 0
    text = near_miss.text(80)
    assert max(len(ln) for ln in text.splitlines()) <= 80
    assert "Whole against regional (4 blocks compiled one by one)" in text


def test_no_repeated_blocks_says_so_and_exits_0(cli):
    rc, out, err = cli("compile", "examples/mlp.py", "--backend", "eager", "--regional", "--steps", "1")
    assert rc == 0, err
    assert "no repeated blocks" in " ".join(out.split())


def test_a_compile_that_fails_is_torchs_error_at_the_users_line_exit_1(cli):
    rc, out, err = cli("compile", FIXTURES / "compile_fails.py", "--backend", "eager", "--steps", "1", "--format", "json")
    assert rc == 1, err
    stopped = json.loads(out)["stopped"]
    assert stopped["kind"] == "compile_failed" and stopped["file"].endswith("compile_fails.py") and stopped["line"] == 23
    assert "compile_fails.py:23: torch.compile failed" in err and "Traceback" not in err


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads the process table from /proc")
def test_past_the_timeout_the_child_is_ended_and_what_finished_is_shown(cli, tmp_path, monkeypatch):
    marker = tmp_path / "pid"
    monkeypatch.setenv("GRAPHTOOL_TEST_MARKER", str(marker))
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", None)  # TMPDIR is read again
    rc, out, err = cli("compile", FIXTURES / "sleeps_compiled.py", "--backend", "eager", "--timeout", "20", "--steps", "1",
                       "--format", "json")
    assert rc == 2, err
    doc = json.loads(out)
    assert doc["stopped"]["kind"] == "timeout" and "the child was ended" in doc["stopped"]["message"]
    assert doc["eager"]["step_seconds"] is not None  # what finished before the compile was cut
    pid = int(marker.read_text())
    deadline = time.monotonic() + 10
    while Path(f"/proc/{pid}").exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not Path(f"/proc/{pid}").exists()
    assert not list(tmp_path.glob("graphtool-*"))  # the temporary folders are gone
