"""``graphtool devices``: which device every node would run on, on a GPU (meta standing in for one).

Example::

    >>> devices("examples/cpu_roundtrip.py")[0].found
    True
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from graphtool.commands import shared
from graphtool.commands.progress import SILENT, Progress


@dataclass(frozen=True, repr=False)
class DevicesResult(shared.ModelResult):
    """One model's DeviceReport."""

    command = "devices"
    key = "devices"

    def body(self):
        from graphtool.render.devices import devices_view

        return devices_view(self.report)

    def sections(self) -> list[str]:
        from graphtool.render.report import devices_section

        return [devices_section(self.report)]


def devices(model: Optional[str] = None, *, entry: Optional[str] = None, device: Optional[str] = None,
            inference: bool = False, backend: str = "inductor", debug: bool = False,
            progress: Progress = SILENT) -> list[DevicesResult]:
    """One :class:`DevicesResult` (a DeviceReport) per model; ``found`` when a node is off the main device."""
    from graphtool.analysis.devices import device_report

    shared.check_aot_backend(backend)
    results = []
    for target, ent in shared.targets(model, entry):
        capture, accel = shared.trace_standin(target, ent, device, inference, backend=backend, debug=debug,
                                             progress=progress)
        stand_in = "meta stands for cuda:0" if accel == "meta" else None
        report = device_report(capture, main_device=accel, stand_in=stand_in)
        # regions left unjudged are no pass: --check fails rather than vouch for graphs it never read
        found = report.found or bool(capture.no_graph) or not report.complete
        results.append(DevicesResult(shared.model_header(capture), report, found))
    return results
