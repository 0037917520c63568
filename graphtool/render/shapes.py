"""The ``shapes`` view: the verdict over the schedule, the steps where something happens, the advice.

A 200-step schedule does not print 200 lines: a step that only replays CUDA graphs it recorded before
(its size settled) is counted, not listed, and each run of them reads as one line::

    steps 9-16: replay only (8 steps)
"""

from __future__ import annotations

from rich.console import Group
from rich.text import Text

from graphtool.render.diagnostics import Hanging


def _eventful(s) -> bool:
    """A step worth a line: it compiles, records, warms up, runs eagerly or runs compiled calls without CUDA graphs
    (sizes outside ``cudagraph_capture_sizes``): only a step that replays and nothing else folds into "replay only".

    >>> from graphtool.analysis.shapes import ShapeStep
    >>> _eventful(ShapeStep(5, {"x:1": 32}, 0, (), (), False, 0, 0, 0, uncaptured=1))
    True
    """
    return bool(s.graphs_compiled or s.recompiles or s.eager or s.recordings or s.warmups or s.uncaptured)


def step_lines(report) -> list:
    """One line per step that compiles, records, warms up or runs eagerly; quiet runs folded into one line.
    Each is laid out at the console's width with its continuation indented under it (:class:`Hanging`)."""
    out: list = []
    quiet: list[int] = []

    def flush():
        if quiet:
            span = f"step {quiet[0]}" if len(quiet) == 1 else f"steps {quiet[0]}-{quiet[-1]}"
            out.append(Text(f"  {span}: replay only ({len(quiet)} step{'s' if len(quiet) != 1 else ''})", style="note"))
            quiet.clear()

    for s in report.per_step:
        if not _eventful(s):
            quiet.append(s.step)
            continue
        flush()
        out.append(Hanging("  ", report.step_line(s), rest="      ", style="verdict.bad" if s.eager else None))
        for reason in s.recompiles:
            out.append(Hanging("      recompile: ", reason, rest="        ", style="warning"))
    flush()
    return out


def shapes_view(report) -> Group:
    from graphtool.display_paths import display_site

    parts: list = [Hanging("schedule: ", display_site(report.source), rest="  ", style="header"),
                   Hanging(f"{report.mode}: ", report.mode_why or "", rest="  ", style="header")]
    bad = report.limit_step is not None or report.failed
    parts.append(Hanging("", report.headline(), rest="  ", style="verdict.bad" if bad else "verdict"))
    loud = report.loud()
    if loud:
        parts.append(Hanging("", loud, rest="  ", style="verdict.bad"))
    if report.failed:
        parts.append(Hanging("the loop fails: ", report.failed, rest="  ", style="verdict.bad"))
    if report.left_out:
        parts.append(Hanging("left out: ", report.left_out, rest="  ", style="note"))
    parts += step_lines(report)
    for w in report.warnings:
        parts.append(Hanging("warning: ", w, rest="  ", style="warning"))
    settings = ", ".join(f"{k}={v}" for k, v in report.settings.items())
    if settings:
        parts.append(Hanging("settings: ", settings, rest="  "))
    checked = [a for a in report.advice if a.predicted]
    if checked:
        parts.append(Text("advice (each checked by predicting the changed schedule):", style="header"))
        for a in checked:
            parts.append(Hanging("  - ", a.text, style="fixed"))
    code = [a for a in report.advice if not a.predicted]
    if code:
        parts.append(Text("advice (a change to the model's code, not predicted):", style="header"))
        for a in code:
            parts.append(Hanging("  - ", a.text, style="fixed"))
    return Group(*parts)
