"""``graphtool log`` from the command line: its view at 80 columns, JSON and YAML, the page, bad input, no torch."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
from importlib import resources

import pytest
import yaml

from tests.helpers import ROOT
from tests.helpers.console import render_text
from tests.log.handmade import BREAK_PAYLOAD, record, small_log
from tests.log.recorded import DDP_213, LOOP_213

SCHEMA = json.loads(resources.files("graphtool.schema").joinpath("log.schema.json").read_text())


def _doc(cli, *args) -> dict:
    rc, out, err = cli("log", *args, "--format", "json")
    assert rc == 0, err
    doc = json.loads(out)
    jsonschema = pytest.importorskip("jsonschema")
    jsonschema.validate(doc, SCHEMA)
    return doc


def test_ddp_run_at_80_columns():
    from graphtool.commands.log import log

    text = render_text(log([DDP_213 / "trace"]).view(), 80)
    lines = text.splitlines()
    assert lines[0] == "2 TORCH_TRACE files (ranks 0, 1), torch 2.13.0+cpu, 10,071 lines"
    assert lines[1].startswith("desync: ranks compiled different graphs: rank 0 compiled 1 graph;")
    assert any(ln.startswith("desync: rank 1 breaks at tests/fixtures/torch_trace/record.py:47 [gb0059]") for ln in lines)
    assert "tests/fixtures/torch_trace/record.py:47:13: GT-B001 graph break: Failed to trace\n    builtin operator" in text
    assert '47 |             print("rank-only branch")  # graph break on this rank only' in text
    assert "   = seen: once, in forward (0/0); rank 1" in text
    # each rank's calls captured (the counters the recorded truth holds: 4 on each rank)
    assert [ln.split("│")[4].strip() for ln in lines if ln.startswith("│ 0 ") or ln.startswith("│ 1 ")] == ["4", "4"]
    long = [ln for ln in lines if len(ln) > 80]
    # only what a diagnostic never cuts may pass 80 columns: a path:line:col head
    assert all(":" in ln.split(" ")[0] for ln in long), long


def test_json_is_the_documented_schema(cli):
    doc = _doc(cli, LOOP_213 / "trace")
    assert doc["graphs_compiled"] == 6 and doc["compile_ids"] == 7
    (site,) = doc["graph_breaks"]
    assert (site["file"], site["line"], site["gb_id"], site["count"], site["ranks"]) == (
        "tests/fixtures/torch_trace/record.py", 54, "gb0059", 2, [None])
    assert [r["frame"] for r in doc["recompiles"]] == ["forward", "torch_dynamo_resume_in_forward_at_54", "shift", "shift"]
    assert doc["recompiles"][0]["reason"] == "0/0: tensor 'x' size mismatch at index 0. expected 2, actual 3"
    assert doc["recompile_limit"][0]["frame"] == "shift"
    assert doc["log"]["torch_version"] == "2.13.0+cpu" and doc["log"]["bad_payloads"] == 0
    assert doc["compile_time"]["seconds"] == pytest.approx(sum(doc["compile_time"]["phases"].values()), abs=1e-4)
    assert doc["cudagraph_skips"] == [] and doc["desync"] == [] and doc["against"] is None


def test_yaml_is_the_same_document(cli):
    rc, out, _ = cli("log", DDP_213 / "trace", "--format", "yaml")
    assert rc == 0
    doc = yaml.safe_load(out)
    assert [d["kind"] for d in doc["desync"]] == ["graphs", "graph_breaks"]


def test_page_draws_each_compiles_aot_graphs(cli, tmp_path):
    page = tmp_path / "log.html"
    rc, out, err = cli("log", DDP_213 / "trace", "-o", page)
    assert rc == 0, err
    html = page.read_text()
    assert html.startswith("<!DOCTYPE html>") and "<title>graphtool log:" in html and "<h1>graphtool log:" in html
    assert 'id="desync"' in html and 'id="viewer"' in html and "<th>calls captured</th>" in html
    assert html.count('class="tab"') + html.count('class="tab active"') == 6  # each rank's compiles, forward and backward
    assert "page written to" in err and "desync:" in out


def _write(tmp_path, name: str, data: bytes):
    p = tmp_path / name
    p.write_bytes(data)
    return p


@pytest.mark.parametrize("case", ["missing", "empty folder", "folder of other files", "not a trace", "empty file"])
def test_no_trace_exits_2_naming_the_path(cli, tmp_path, case):
    if case == "missing":
        path = tmp_path / "nope"
        want = "no such file or folder"
    elif case == "empty folder":
        path = tmp_path
        want = "no TORCH_TRACE log here"
    elif case == "folder of other files":
        (tmp_path / "notes.txt").write_text("x")
        path = tmp_path
        want = "no TORCH_TRACE log here"
    elif case == "not a trace":
        path = _write(tmp_path, "README.log", b"# hello\nnot torch\n")
        want = "not a TORCH_TRACE log (2 lines read, none a structured-trace record)"
    else:
        path = _write(tmp_path, "empty.log", b"")
        want = "not a TORCH_TRACE log (0 lines read"
    rc, out, err = cli("log", path)
    assert rc == 2 and out == ""
    assert err.startswith("graphtool: error: ") and str(path) in err and want in err
    assert "Traceback" not in err


def _damaged(kind: str) -> bytes:
    log = small_log()
    if kind == "truncated mid-payload":
        extra = record("artifact", {"name": "dynamo_graph_break_reason"}, BREAK_PAYLOAD.replace("13", "27"),
                       frame_id=3, frame_compile_id=0, attempt=0)
        return log + extra[: len(extra) // 2]
    if kind == "md5 mismatch":
        i = log.index(b"Graph break in user code at /app/model.py:13")
        return log[:i] + b"Graph break in user code at /app/model.py:99" + log[i + 44:]
    if kind == "binary garbage":
        i = log.index(b"V1128", 200)
        return log[:i] + b"\x00\x9c\xff\x12garbage\x07\n\x89PNG\r\n" + log[i:]
    if kind == "newer torch key":
        return log + record("compilation_metrics", {"compile_id": "2/0", "co_name": "g"}, frame_id=2, frame_compile_id=0,
                            attempt=0, trace_epoch=4)
    raise AssertionError(kind)


@pytest.mark.parametrize("kind", ["truncated mid-payload", "md5 mismatch", "binary garbage", "newer torch key"])
def test_damaged_logs_give_the_intact_facts_and_name_the_damage(cli, tmp_path, kind):
    path = _write(tmp_path, "dedicated_log_torch_trace_x.log", _damaged(kind))
    doc = _doc(cli, path)
    info = doc["log"]
    assert doc["graphs_compiled"] == 3  # the intact records' graphs, whatever the damage
    assert [r["compile_id"] for r in doc["recompiles"]] == ["0/1"]
    if kind == "truncated mid-payload":
        assert info["bad_payloads"] == 1 and "cut off" in info["bad_payload_examples"][0]["why"]
        assert [b["line"] for b in doc["graph_breaks"]] == [13, None]  # the cut break: counted, its site unknown
    elif kind == "md5 mismatch":
        assert info["bad_payloads"] == 1 and info["bad_payload_examples"][0]["why"].startswith("md5 mismatch")
        assert [b["line"] for b in doc["graph_breaks"]] == [None]  # never line 99: a tampered payload is not trusted
        assert doc["graph_breaks"][0]["damaged"]
    elif kind == "binary garbage":
        assert info["bad_lines"] == 2 and info["bad_payloads"] == 0
        assert [b["line"] for b in doc["graph_breaks"]] == [13]
    else:
        assert info["unknown"] == [{"kind": "envelope key", "key": "trace_epoch", "count": 1,
                                    "file": str(path), "line": small_log().count(b"\n") + 1}]
    rc, out, err = cli("log", path)
    assert rc == 0 and "Traceback" not in err
    assert ("log damage:" in out) or ("unknown: envelope key 'trace_epoch'" in out)


def test_gz_file_given_directly(cli, tmp_path):
    path = _write(tmp_path, "dedicated_log_torch_trace_rank_0_x.log.gz", gzip.compress(small_log(rank=0)))
    doc = _doc(cli, path)
    assert doc["graphs_compiled"] == 3 and doc["ranks"][0]["rank"] == 0 and doc["log"]["files"][0]["compressed"]


def test_graphtool_log_never_imports_torch():
    code = ("import sys; from graphtool.cli.main import run; "
            f"rc = run(['log', {str(DDP_213 / 'trace')!r}, '--format', 'json']); "
            "assert rc == 0, rc; bad = [m for m in sys.modules if m == 'torch' or m.startswith('torch.')]; "
            "assert not bad, bad")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, env=env, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
