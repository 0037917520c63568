"""``graphtool log`` on real logs (committed, recorded by tests/fixtures/torch_trace/record.py on torch 2.13 and 2.15)
against torch's own account of the same process: its counters and dynamo's own log lines, read cheaply here;
tests/truth/test_log_truth.py records them again on the torch under test (slow tier)."""

from __future__ import annotations

import gzip
import json
import shutil
import subprocess
from pathlib import Path

import pytest

from graphtool.analysis.run_log import read_run_log
from tests.log.recorded import RUNS

VERSIONS = sorted(RUNS)


def _truth(folder: Path, name: str = "truth.json") -> dict:
    return json.loads((folder / name).read_text())


_FACTS: dict = {}


def facts(folder: Path):
    if folder not in _FACTS:
        _FACTS[folder] = read_run_log([folder / "trace"])
    return _FACTS[folder]


@pytest.mark.parametrize("version", VERSIONS)
def test_loop_facts_are_torchs_own(version):
    loop, _ = RUNS[version]
    f, t = facts(loop), _truth(loop)
    assert f.log.torch_version == t["torch"]
    c = t["counters"]
    assert f.graphs_compiled == c["stats"]["unique_graphs"]
    assert f.compile_ids == c["frames"]["total"]
    assert sum(x.graphs > 0 for x in f.compiles) == c["frames"]["ok"]
    assert {(b.file, b.line) for b in f.graph_breaks} == {tuple(s) for s in t["graph_break_sites"]}
    assert f.break_records == sum(c["graph_break"].values())
    assert [(r.frame, r.file, r.line) for r in f.recompiles] == [tuple(r[:3]) for r in t["recompiles"]]
    # the third name is past recompile_limit: dynamo refused it ("Dynamo recompile limit exceeded" in unimplemented)
    assert [s.frame for s in f.recompile_limit] == ["shift"]
    assert any("recompile limit" in k for k in c["unimplemented"])


@pytest.mark.parametrize("version", VERSIONS)
def test_ddp_desync_where_rank_1_breaks(version):
    _, ddp = RUNS[version]
    f = facts(ddp)
    for r in f.ranks:
        t = _truth(ddp, f"truth_rank_{r.rank}.json")
        assert r.graphs_compiled == t["counters"]["stats"]["unique_graphs"]
        assert r.compile_ids == t["counters"]["frames"]["total"]
        assert {(b.file, b.line) for b in f.graph_breaks if r.rank in b.ranks} == {tuple(s) for s in t["graph_break_sites"]}
    assert [r.rank for r in f.ranks] == [0, 1]
    kinds = [d.kind for d in f.desync]
    assert kinds == ["graphs", "graph_breaks"]
    assert "rank 1 breaks at tests/fixtures/torch_trace/record.py:47" in f.desync[1].message


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


TLPARSE = shutil.which("tlparse")


@pytest.mark.skipif(TLPARSE is None, reason="tlparse is a test extra (pip install tlparse)")
@pytest.mark.parametrize("version", VERSIONS)
def test_tlparse_agrees_on_compile_ids_and_break_counts(version, tmp_path):
    for folder in RUNS[version]:
        f = facts(folder)
        for path in sorted(_plain_copy(folder, tmp_path).glob("*.log")):
            out = tmp_path / ("tl-" + path.stem)
            subprocess.run([TLPARSE, str(path), "-o", str(out), "--no-browser", "--overwrite"], check=True,
                           capture_output=True, timeout=120)
            directory = json.loads((out / "compile_directory.json").read_text())
            ids = {k.strip("[]").split("_")[0] for k in directory if k != "[-/-]"}
            breaks = sum(1 for v in directory.values() for a in v["artifacts"] if a["name"].startswith("dynamo_graph_break_reason"))
            rank = next(x.rank for x in f.log.files if Path(x.path).name.startswith(path.name))
            mine = [c for c in f.compiles if c.rank == rank]
            assert ids == {c.compile_id for c in mine}
            assert breaks == next(r.graph_breaks for r in f.ranks if r.rank == rank)


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
