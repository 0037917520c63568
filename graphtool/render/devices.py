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
    # the node count is trace's (every node of the graph); the ones with no device are said, not dropped
    rows = [(str(g.region), g.graph, "" if g.nodes is None else str(g.nodes),
             ", ".join(report.shown_counts(g))) for g in report.graphs]
    title = "nodes per device (no device: the output node, getitem of a tuple, sizes)"
    if report.stand_in:  # its graphs are the accelerator's, which can differ from trace's own-device graphs
        title += f"; graphs traced for {report.show(report.main_device)}: counts can differ from trace's (the model's own device)"
    parts.append(FitTable(title,
                          [Col("region"), Col("graph"), Col("nodes"), Col("devices")], rows))
    diags = device_diagnostics(report)
    if diags:
        parts.append(diagnostics_view(diags))
    return Group(*parts)
