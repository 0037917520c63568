"""``graphtool devices``: which device every node would run on, on a GPU (meta standing in for one).

Example::

    >>> devices("examples/cpu_roundtrip.py")[0].found
    True
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from graphtool.commands.result import ModelResult, model_header
from graphtool.commands.session import per_model

if TYPE_CHECKING:
    from graphtool.analysis.devices import DeviceReport


@dataclass(frozen=True, repr=False)
class DevicesResult(ModelResult):
    """One model's DeviceReport."""

    report: DeviceReport

    command = "devices"
    key = "devices"

    def body(self):
        from graphtool.render.devices import devices_view

        return devices_view(self.report)

    def sections(self) -> list[str]:
        from graphtool.render.report import devices_section

        return [devices_section(self.report)]


devices = per_model("devices")


def run(session) -> DevicesResult:
    """The session's stand-in trace, its first step, read for devices; ``found`` when a node is off the main device."""
    from graphtool.analysis.devices import device_report

    capture, accel, _ = session.first_step()
    report = device_report(capture, main_device=accel, stand_in="meta stands for cuda:0" if accel == "meta" else None)
    # regions left unjudged are no pass: --check fails rather than vouch for graphs it never read
    found = report.found or bool(capture.no_graph) or not report.complete
    return DevicesResult(model_header(capture), report, found)
