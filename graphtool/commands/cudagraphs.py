"""``graphtool cudagraphs``: would CUDA graphs be applied to each model, and if not, why.

Example::

    >>> cudagraphs("examples/mlp.py")[0].report.eligible
    True
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Optional

from graphtool.commands import steps
from graphtool.commands.progress import SILENT, Progress


def cudagraphs(model: Optional[str] = None, *, entry: Optional[str] = None, device: Optional[str] = None,
               inference: bool = False, backend: str = "inductor", dynamic: bool = False, debug: bool = False,
               settings: Sequence[str] = (), progress: Progress = SILENT) -> list[steps.ModelResult]:
    """One :class:`ModelResult` (a Verdict) per model; ``found`` when a reason makes torch skip.

    ``settings`` (``["graph_partition=false"]``) override the installed torch's inductor and dynamo
    config for the verdict; they are checked before any tracing."""
    from graphtool.analysis.cudagraphs import check_backend, cudagraph_verdict, parse_settings

    check_backend(backend)
    overrides = parse_settings(settings)
    results = []
    for target, ent in steps.targets(model, entry):
        capture, accel = steps.trace_standin(target, ent, device, inference, backend=backend, dynamic=dynamic,
                                             debug=debug, progress=progress)
        verdict = cudagraph_verdict(capture, backend=backend, predicted=accel == "meta", settings=overrides)
        found = any(r.skips for r in verdict.reasons) or bool(capture.no_graph) or not verdict.eligible
        results.append(steps.ModelResult(steps.model_header(capture), verdict, found, key="cudagraphs",
                                         stopped=capture.stopped))
    return results
