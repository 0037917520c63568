"""``graphtool devices``: which device every node would run on, on a GPU (meta standing in for one).

Example::

    >>> devices("examples/cpu_roundtrip.py")[0].found
    True
"""

from __future__ import annotations

from typing import Optional

from graphtool.commands import steps
from graphtool.commands.progress import SILENT, Progress


def devices(model: Optional[str] = None, *, entry: Optional[str] = None, device: Optional[str] = None,
            inference: bool = False, backend: str = "inductor", debug: bool = False,
            progress: Progress = SILENT) -> list[steps.ModelResult]:
    """One :class:`ModelResult` (a DeviceReport) per model; ``found`` when a node is off the main device."""
    from graphtool.analysis.devices import device_report

    steps.check_backend(backend)
    results = []
    for target, ent in steps.targets(model, entry):
        capture, accel = steps.trace_standin(target, ent, device, inference, backend=backend, debug=debug,
                                             progress=progress)
        stand_in = "meta stands for cuda:0" if accel == "meta" else None
        report = device_report(capture, main_device=accel, stand_in=stand_in)
        # regions left unjudged are no pass: --check fails rather than vouch for graphs it never read
        found = report.found or bool(capture.no_graph) or not report.complete
        results.append(steps.ModelResult(steps.model_header(capture), report, found, key="devices"))
    return results
