"""``graphtool cudagraphs``: would CUDA graphs be applied to each model, and if not, why.

Example::

    >>> cudagraphs("examples/mlp.py")[0].report.eligible
    True
"""

from __future__ import annotations

from typing import Optional

from graphtool.commands import steps
from graphtool.commands.progress import SILENT, Progress


def cudagraphs(model: Optional[str] = None, *, entry: Optional[str] = None, device: Optional[str] = None,
               inference: bool = False, backend: str = "inductor", dynamic: bool = False, debug: bool = False,
               progress: Progress = SILENT) -> list[steps.ModelResult]:
    """One :class:`ModelResult` (a Verdict) per model; ``found`` when a reason makes torch skip."""
    from graphtool.analysis.cudagraphs import check_backend, cudagraph_verdict

    check_backend(backend)
    results = []
    for target, ent in steps.targets(model, entry):
        capture, accel = steps.trace_standin(target, ent, device, inference, backend=backend, dynamic=dynamic,
                                             debug=debug, progress=progress)
        verdict = cudagraph_verdict(capture, backend=backend, predicted=accel == "meta")
        found = any(r.skips for r in verdict.reasons) or bool(capture.no_graph) or not verdict.eligible
        results.append(steps.ModelResult(steps.model_header(capture), verdict, found, key="cudagraphs",
                                         stopped=capture.stopped))
    return results
