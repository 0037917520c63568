"""The ``devices`` view: nodes per device, then every cross-device copy and every other node off the
main device as a diagnostic. On the meta stand-in the main device reads ``cuda:0 (predicted)``."""

from __future__ import annotations

from rich.console import Group
from rich.text import Text

from graphtool.render.diagnostics import diagnostics_view
from graphtool.render.tables import Col, FitTable


def devices_view(report) -> Group:
    from graphtool.analysis.diagnostics import device_diagnostics

    parts = [Text(report.verdict(), style="verdict")]
    rows = [(str(g.region), g.graph, ", ".join(f"{report.show(d)}: {n}" for d, n in g.counts.items())) for g in report.graphs]
    parts.append(FitTable("nodes per device", [Col("region"), Col("graph"), Col("devices")], rows))
    diags = device_diagnostics(report)
    if diags:
        parts.append(diagnostics_view(diags))
    return Group(*parts)
