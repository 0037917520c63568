"""``graphtool lint --log``: a real run's breaks and recompiles judged with lint's budgets, baseline, formats and exits."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from tests.helpers import ROOT
from tests.log.handmade import BREAK_PAYLOAD, record, small_log
from tests.log.recorded import DDP_213, LOOP_213


def test_budgets_and_the_recompile_limit(cli):
    rc, out, err = cli("lint", "--log", DDP_213 / "trace", "--max-graph-breaks", "1", "--format", "json")
    assert rc == 0, err
    (m,) = json.loads(out)["models"]
    assert (m["graph_count"], m["graph_break_count"], m["recompile_count"]) == (3, 1, 0)
    assert m["breaks"][0]["source_text"] == 'print("rank-only branch")  # graph break on this rank only'
    rc, out, _ = cli("lint", "--log", LOOP_213 / "trace", "--max-graph-breaks", "1", "--max-recompiles", "10")
    assert rc == 1  # within both budgets, but a frame hit recompile_limit: lint fails whatever the budget
    assert "recompile limit hit (shift at tests/fixtures/torch_trace/record.py:58, compile 2/2)" in out


def test_baseline_then_a_new_break_fails(cli, tmp_path):
    log = tmp_path / "trace"
    log.mkdir()
    (log / "dedicated_log_torch_trace_a.log").write_bytes(small_log())
    base = tmp_path / "gb.json"
    rc, _, err = cli("lint", "--log", log, "--baseline", base, "--update-baseline")
    assert rc == 0 and base.exists(), err
    rc, out, _ = cli("lint", "--log", log, "--baseline", base)
    assert rc == 0, out
    new = BREAK_PAYLOAD.replace("/app/model.py:13", "/app/model.py:31").replace("line 13", "line 31")
    (log / "dedicated_log_torch_trace_a.log").write_bytes(
        small_log() + record("artifact", {"name": "dynamo_graph_break_reason"}, new, frame_id=4, frame_compile_id=0, attempt=0))
    rc, out, _ = cli("lint", "--log", log, "--baseline", base, "--format", "github")
    assert rc == 1
    assert "file=/app/model.py,line=31" in out


def test_sarif_and_no_log(cli, tmp_path):
    rc, out, _ = cli("lint", "--log", LOOP_213 / "trace", "--format", "sarif")
    assert rc == 1 and json.loads(out)["runs"][0]["results"]  # the recompile limit fails lint
    rc, out, err = cli("lint", "--log", tmp_path)
    assert rc == 2 and "no TORCH_TRACE log here" in err
    rc, out, err = cli("lint", "examples/mlp.py", "--log", LOOP_213 / "trace")
    assert rc == 2 and "--log judges a run's logs" in err


def test_lint_log_never_imports_torch():
    code = ("import sys; from graphtool.cli.main import run; "
            f"rc = run(['lint', '--log', {str(LOOP_213 / 'trace')!r}, '--format', 'json']); "
            "assert rc == 1, rc; assert 'torch' not in sys.modules")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT,
                          env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
