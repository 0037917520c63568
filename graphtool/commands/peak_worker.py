"""``lint --max-peak-memory``'s child: one model's predicted training-step peak, as ``graphtool memory --fit`` gives it.

It runs as ``python -m graphtool.commands.peak_worker JOB.json RESULT.json`` under lint's own child machinery
(:func:`graphtool.capture.processes.children.run_jobs`: a process group killed on every way out, ``--jobs`` at a
time, ``--timeout`` each), so the model's script runs in a process of its own as lint's child runs it.

The job is ``{"path", "entry", "fit"}``; the result ``{"ok": true, "fit": FitReport.to_dict()}``, or ``ok`` false
with graphtool's error and exit code.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def predict(job: dict) -> dict:
    from graphtool.commands.session import Session
    from graphtool.errors import GraphtoolError

    try:
        result = Session(job["path"], entry=job.get("entry")).memory(fit=job["fit"])
    except GraphtoolError as err:
        return {"ok": False, "error": err.message, "exit_code": err.exit_code}
    return {"ok": True, "fit": result.fit.to_dict()}


def main(argv: list[str]) -> int:
    from graphtool.capture.stack_room import call_with_stack_room

    job_path, result_path = argv
    result = call_with_stack_room(predict, json.loads(Path(job_path).read_text()))
    from graphtool.render.documents import write_atomic

    write_atomic(Path(result_path), json.dumps(result, default=str))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
