"""``graphtool log`` against torch itself, recorded now on the torch under test (2.13 in the slow tier, 2.15 under
``-m versions``): the loop of tests/fixtures/torch_trace/record.py (a break, recompiles, the recompile limit) and a
2-rank gloo DDP run where rank 1 breaks, each under TORCH_TRACE with its own counters dumped at its end. The three
processes run at once, once per module (plain processes: TORCH_TRACE must be set before torch is imported, so the
suite's preloaded server cannot fork them); the cheap tests of tests/log read the logs committed from both torches."""

from __future__ import annotations

import gzip
import threading

import pytest

from graphtool.analysis.run_log import read_run_log
from tests.log.recorded import check_ddp, check_loop, check_tlparse, record_ddp, record_loop

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """One recording of each case (the loop and the two ranks side by side); caches on, as a user's run has them."""
    root = tmp_path_factory.mktemp("log-truth")
    loop, ddp = root / "loop", root / "ddp"
    failed: list[BaseException] = []

    def ranks():
        try:
            record_ddp(ddp, timeout=480)
        except BaseException as exc:  # reported by the test, after the loop's recording ends too
            failed.append(exc)

    t = threading.Thread(target=ranks)
    t.start()
    try:
        record_loop(loop, timeout=480)
    finally:
        t.join()
    if failed:
        raise failed[0]
    return loop, ddp


def test_loop(runs):
    loop, _ = runs
    check_loop(loop, read_run_log([loop / "trace"]))


def test_ddp_desync(runs):
    _, ddp = runs
    check_ddp(ddp, read_run_log([ddp / "trace"]))


def test_tlparse_and_gzip_agree(runs, tmp_path):
    for folder in runs:
        facts = read_run_log([folder / "trace"])
        logs = sorted((folder / "trace").glob("*.log"))
        check_tlparse(logs, facts, tmp_path)
        zipped = tmp_path / folder.name
        zipped.mkdir()
        for f in logs:
            (zipped / (f.name + ".gz")).write_bytes(gzip.compress(f.read_bytes()))
        again = read_run_log([zipped]).to_dict()
        mine = facts.to_dict()
        for d in (again, mine):
            for f in d["log"]["files"]:
                f.pop("path"), f.pop("compressed"), f.pop("bytes")
            for r in d["ranks"]:
                r.pop("files")
        assert again == mine
