"""What crosses the process boundary in ``graphtool compile``: the job one child runs, the files it leaves for the
parent (its TORCH_TRACE log and a status file of JSON lines), and how the child is started (:func:`run_compile_job`,
through lint's child machinery: a timeout, the whole process group killed on every way out, the user's prints on
stderr). Nothing else names the worker module.

A child runs one ``stage``:

- ``whole``: the model's step eagerly, then ``torch.compile(model)`` with the user's backend and mode (the first
  compiled call timed), the compiled step, then each repeated block compiled alone by dynamo (the probe);
- ``warm``: the same compile again in a second process with inductor's caches on (the hits);
- ``regional``: each of ``blocks`` compiled on its own (``block.compile(...)``), the first call and the step timed.

Example::

    >>> job = CompileJob(path="m.py", stage="whole", trace_dir="/tmp/t", status_path="/tmp/s")
    >>> CompileJob.from_dict(job.to_dict()) == job
    True
    >>> job.environment()["TORCHINDUCTOR_FORCE_DISABLE_CACHES"]
    '1'
    >>> {k: v for k, v in CompileJob("m.py", "warm", "/t", "/s", caches=True).environment().items() if k in CACHES_ON}
    {'TORCHINDUCTOR_FORCE_DISABLE_CACHES': '0', 'TORCH_COMPILE_FORCE_DISABLE_CACHES': '0', \
'TORCHINDUCTOR_FX_GRAPH_CACHE': '1', 'TORCHINDUCTOR_AUTOGRAD_CACHE': '1'}
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Optional

#: the child-process entry point (``python -m WORKER JOB.json RESULT.json``)
WORKER = "graphtool.capture.processes.compile_worker"

STAGES = ("whole", "warm", "regional")

#: graphtool's own artifact in the child's TORCH_TRACE log: its payload names the stage whose records follow
#: (``whole``, ``warm``, ``regional``, ``probe``)
STAGE_ARTIFACT = "graphtool_stage"

#: what ``--warm``'s two children set so that inductor's FX graph cache and AOT autograd's cache are on whatever the
#: user's environment says: with any of these turned off there (a CI runner's ``TORCHINDUCTOR_FX_GRAPH_CACHE=0``),
#: the "cold" child counted no miss and the "warm" one no hit, and --warm measured two cold compiles
CACHES_ON = {"TORCHINDUCTOR_FORCE_DISABLE_CACHES": "0", "TORCH_COMPILE_FORCE_DISABLE_CACHES": "0",
             "TORCHINDUCTOR_FX_GRAPH_CACHE": "1", "TORCHINDUCTOR_AUTOGRAD_CACHE": "1"}


def caches_off_here(environ=None) -> list[str]:
    """The variables of ``environ`` (this process's) that turn inductor's caches off: ``--warm`` overrides them in
    its children and says so.

    >>> caches_off_here({"TORCHINDUCTOR_FX_GRAPH_CACHE": "0", "TORCHINDUCTOR_AUTOGRAD_CACHE": "1"})
    ['TORCHINDUCTOR_FX_GRAPH_CACHE=0']
    """
    environ = os.environ if environ is None else environ
    return [f"{k}={environ[k]}" for k, on in CACHES_ON.items() if k in environ and environ[k] != on]


@dataclass(frozen=True)
class CompileJob:
    path: str
    stage: str
    trace_dir: str
    status_path: str
    entry: Optional[str] = None
    backend: str = "inductor"
    mode: Optional[str] = None
    device: Optional[str] = None
    inference: bool = False
    steps: int = 3  # timed steps after the first call (their median is the step time)
    caches: bool = False  # inductor's caches on (``--warm``'s two processes) or off (TORCHINDUCTOR_FORCE_DISABLE_CACHES)
    cache_dir: Optional[str] = None  # a private TORCHINDUCTOR_CACHE_DIR: the user's own caches are never read or written
    blocks: tuple[str, ...] = ()  # ``regional``: the modules compiled one by one
    probe: bool = True  # ``whole``: compile each repeated block alone (dynamo only) to tell which are identical
    debug: bool = False

    def to_dict(self) -> dict:
        d = asdict(self)
        d["blocks"] = list(self.blocks)
        return d

    @classmethod
    def from_dict(cls, d: dict) -> CompileJob:
        d = dict(d)
        d["blocks"] = tuple(d.get("blocks", ()))
        return cls(**d)

    def environment(self) -> dict[str, str]:
        """What the child sets before it imports torch: the trace folder, and the caches as asked."""
        env = {"TORCH_TRACE": self.trace_dir}
        if self.cache_dir:
            env["TORCHINDUCTOR_CACHE_DIR"] = self.cache_dir
            env["TRITON_CACHE_DIR"] = os.path.join(self.cache_dir, "triton")
        if self.caches:
            env.update(CACHES_ON)
        else:
            env["TORCHINDUCTOR_FORCE_DISABLE_CACHES"] = "1"
        return env


def read_status(path: str | os.PathLike) -> tuple[list[str], dict]:
    """The stages a child said it entered (in order) and the facts it wrote as it went (``eager_step`` ...): what
    is known of a child that was stopped before it wrote its result. A line cut by the kill is skipped."""
    stages: list[str] = []
    facts: dict = {}
    try:
        text = Path(path).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return stages, facts
    for line in text.splitlines():
        try:
            item = json.loads(line)
        except ValueError:
            continue
        if isinstance(item, dict):
            if "stage" in item:
                stages.append(str(item["stage"]))
            facts.update(item.get("facts") or {})
    return stages, facts


def run_compile_job(job: CompileJob, *, timeout: float | None = None, on_tick: Callable[[], None] | None = None) -> dict:
    """Run one job in a fresh child; its result (a dict: ``ok``, ``error``, ``exit_code`` when it could not run or
    timed out, else the stage's measurements) once the child is gone."""
    from graphtool.capture.processes.children import run_jobs

    (result,) = run_jobs([job.to_dict()], worker=WORKER, timeout=timeout, on_tick=on_tick)
    return result
