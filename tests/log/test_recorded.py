"""``graphtool log`` on real logs (committed, recorded by tests/fixtures/torch_trace/record.py on torch 2.13 and 2.15)
against torch's own account of the same process: its counters and dynamo's own log lines, read cheaply here;
tests/truth/test_log_truth.py records them again on the torch under test (slow tier)."""

from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path

import pytest

from graphtool.analysis.run_log import read_run_log
from tests.log.recorded import RUNS, check_ddp, check_loop, check_tlparse

VERSIONS = sorted(RUNS)


_FACTS: dict = {}


def facts(folder: Path):
    if folder not in _FACTS:
        _FACTS[folder] = read_run_log([folder / "trace"])
    return _FACTS[folder]


@pytest.mark.parametrize("version", VERSIONS)
def test_loop_facts_are_torchs_own(version):
    loop, _ = RUNS[version]
    check_loop(loop, facts(loop))


@pytest.mark.parametrize("version", VERSIONS)
def test_ddp_desync_where_rank_1_breaks(version):
    _, ddp = RUNS[version]
    check_ddp(ddp, facts(ddp))


def _plain_copy(folder: Path, tmp: Path) -> Path:
    out = tmp / folder.parent.name / folder.name
    out.mkdir(parents=True)
    for gz in (folder / "trace").glob("*.log.gz"):
        (out / gz.name[:-3]).write_bytes(gzip.decompress(gz.read_bytes()))
    return out


def _comparable(d: dict) -> dict:
    d = json.loads(json.dumps(d))
    for f in d["log"]["files"]:
        f.pop("path"), f.pop("compressed"), f.pop("bytes")
    for r in d["ranks"]:
        r.pop("files")
    return d


@pytest.mark.parametrize("version", VERSIONS)
def test_gzip_gives_the_same_facts_as_the_plain_log(version, tmp_path):
    for folder in RUNS[version]:
        plain = read_run_log([_plain_copy(folder, tmp_path)])
        assert _comparable(plain.to_dict()) == _comparable(facts(folder).to_dict())


@pytest.mark.skipif(shutil.which("tlparse") is None, reason="tlparse is a test extra (pip install tlparse)")
@pytest.mark.parametrize("version", VERSIONS)
def test_tlparse_agrees_on_compile_ids_and_break_counts(version, tmp_path):
    for folder in RUNS[version]:
        check_tlparse(sorted(_plain_copy(folder, tmp_path).glob("*.log")), facts(folder), tmp_path)


def test_compile_phases_add_up_to_torchs_totals():
    from graphtool.analysis import compile_phases as cp

    for loop, _ in RUNS.values():
        for c in facts(loop).compiles:
            if c.seconds:
                assert sum(c.phases.values()) == pytest.approx(c.seconds, abs=1e-5)
            if c.backward_seconds:
                assert sum(c.backward_phases.values()) == pytest.approx(c.backward_seconds, abs=1e-5)
        t = facts(loop).compile_time
        assert sum(t.phases.values()) == pytest.approx(t.seconds, abs=1e-4)
        assert set(t.phases) == {p.key for p in cp.PHASES}
