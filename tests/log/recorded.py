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
