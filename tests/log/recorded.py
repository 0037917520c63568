"""The real TORCH_TRACE logs committed under tests/fixtures/torch_trace, and how to record them again.

Each was written by ``tests/fixtures/torch_trace/record.py`` on this CPU with inductor, run from the repository's
root through ``runpy`` so that the logs name the script by its relative path (its source lines then show in
diagnostics wherever the repository is), with ``truth*.json`` beside it: torch's own account of the same process.

    python -m tests.log.recorded            # record all four again with this interpreter's torch (2.13 or 2.15)
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

from tests.helpers import FIXTURES, ROOT

HERE = FIXTURES / "torch_trace"
SCRIPT = "tests/fixtures/torch_trace/record.py"  # relative: the logs cite it so
LOOP_213, DDP_213 = HERE / "torch-2.13" / "loop", HERE / "torch-2.13" / "ddp"
LOOP_215, DDP_215 = HERE / "torch-2.15" / "loop", HERE / "torch-2.15" / "ddp"
RUNS = {"2.13": (LOOP_213, DDP_213), "2.15": (LOOP_215, DDP_215)}


def _argv(*args: str) -> list[str]:
    code = f"import runpy, sys; sys.argv = {[SCRIPT, *args]!r}; runpy.run_path({SCRIPT!r}, run_name='__main__')"
    return [sys.executable, "-c", code]


def record_loop(out: Path, env: dict | None = None, timeout: float = 600) -> None:
    """The one-process loop (a break, recompiles, the recompile limit) into ``out``: ``trace/`` and ``truth.json``."""
    out.mkdir(parents=True, exist_ok=True)
    subprocess.run(_argv(str(out)), cwd=ROOT, env={**os.environ, **(env or {})}, check=True, timeout=timeout,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def record_ddp(out: Path, env: dict | None = None, timeout: float = 600) -> None:
    """A 2-rank gloo DDP run (rank 1 breaks in forward) into ``out``: ``trace/`` and ``truth_rank_N.json``."""
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        store = os.path.join(tmp, "store")
        procs = [subprocess.Popen(_argv(str(out), str(rank), "2", store), cwd=ROOT, env={**os.environ, **(env or {})},
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
                 for rank in range(2)]
        try:
            for p in procs:
                if p.wait(timeout=timeout) != 0:
                    raise RuntimeError(f"a rank of {SCRIPT} failed (exit {p.returncode})")
        finally:
            for p in procs:
                if p.poll() is None:
                    p.kill()
                    p.wait()


def gzip_logs(out: Path) -> None:
    """Compress the recorded logs in place (``.log`` -> ``.log.gz``), as a CI artifact store keeps them."""
    import gzip

    for f in sorted((out / "trace").glob("*.log")):
        f.with_name(f.name + ".gz").write_bytes(gzip.compress(f.read_bytes(), mtime=0))
        f.unlink()


# -- torch's account against graphtool's: one check per run, shared by the committed logs' tests and the re-recording


def truth(folder: Path, name: str = "truth.json") -> dict:
    import json

    return json.loads((folder / name).read_text())


def check_loop(folder: Path, facts) -> None:
    """The loop's facts are torch's own: its counters, dynamo's "Graph break in user code" and "Recompiling" lines."""
    t = truth(folder)
    c = t["counters"]
    assert facts.log.torch_version == t["torch"]
    assert facts.graphs_compiled == c["stats"]["unique_graphs"]
    assert facts.compile_ids == c["frames"]["total"]
    assert sum(x.graphs > 0 for x in facts.compiles) == c["frames"]["ok"]
    # capture coverage, as torch's benchmarks record it (pytorch#191357): read from the log, equal to the counters
    assert facts.calls_captured == c["stats"]["calls_captured"]
    assert facts.fallbacks_to_eager == c["frames"]["total"] - c["frames"]["ok"] == 1  # the frame past recompile_limit
    assert {(b.file, b.line) for b in facts.graph_breaks} == {tuple(s) for s in t["graph_break_sites"]}
    assert facts.break_records == sum(c["graph_break"].values())
    assert [(r.frame, r.file, r.line) for r in facts.recompiles] == [tuple(r[:3]) for r in t["recompiles"]]
    # the third name is past recompile_limit: dynamo refused it ("Dynamo recompile limit exceeded" in unimplemented)
    assert [s.frame for s in facts.recompile_limit] == ["shift"]
    assert any("recompile limit" in k for k in c["unimplemented"])


def check_ddp(folder: Path, facts) -> None:
    """Each rank's facts are its own counters', and the desync is found: rank 1 compiles two graphs and breaks."""
    for r in facts.ranks:
        t = truth(folder, f"truth_rank_{r.rank}.json")
        assert r.graphs_compiled == t["counters"]["stats"]["unique_graphs"]
        assert r.compile_ids == t["counters"]["frames"]["total"]
        assert r.calls_captured == t["counters"]["stats"]["calls_captured"]
        assert r.fallbacks_to_eager == t["counters"]["frames"]["total"] - t["counters"]["frames"]["ok"]
        assert {(b.file, b.line) for b in facts.graph_breaks if r.rank in b.ranks} == {tuple(s) for s in t["graph_break_sites"]}
    assert [r.rank for r in facts.ranks] == [0, 1]
    assert [d.kind for d in facts.desync] == ["graphs", "graph_breaks"]
    assert "rank 1 breaks at tests/fixtures/torch_trace/record.py:47" in facts.desync[1].message


def check_tlparse(logs: list[Path], facts, tmp: Path) -> None:
    """tlparse, on the same plain logs, finds the same compile ids and as many graph-break records per file."""
    import json
    import shutil

    tlparse = shutil.which("tlparse")
    assert tlparse, "tlparse is a test extra (pip install tlparse)"
    for path in logs:
        out = tmp / ("tl-" + path.stem)
        subprocess.run([tlparse, str(path), "-o", str(out), "--no-browser", "--overwrite"], check=True,
                       capture_output=True, timeout=120)
        directory = json.loads((out / "compile_directory.json").read_text())
        ids = {k.strip("[]").split("_")[0] for k in directory if k != "[-/-]"}
        breaks = sum(1 for v in directory.values() for a in v["artifacts"] if a["name"].startswith("dynamo_graph_break_reason"))
        rank = next(x.rank for x in facts.log.files if Path(x.path).name.startswith(path.name))
        assert ids == {c.compile_id for c in facts.compiles if c.rank == rank}
        assert breaks == next(r.graph_breaks for r in facts.ranks if r.rank == rank)


if __name__ == "__main__":
    import shutil

    import torch

    version = ".".join(torch.__version__.split(".")[:2])
    loop, ddp = RUNS[version]
    for out, record in ((loop, record_loop), (ddp, record_ddp)):
        shutil.rmtree(out, ignore_errors=True)
        record(out, {"TORCHINDUCTOR_FORCE_DISABLE_CACHES": "1"})
        gzip_logs(out)
        print(out, sorted(p.name for p in out.rglob("*")))
