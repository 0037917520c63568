"""Rich renderables for ``graphtool trace``: header, graph breaks and skipped frames as diagnostics,
one table per region, every input named, and one summary line at the end."""

from __future__ import annotations

from rich.console import Console, ConsoleOptions, Group, RenderResult
from rich.text import Text

from graphtool.display_paths import display_path
from graphtool.render.diagnostics import diagnostics_view
from graphtool.render.tables import Col, FitTable

TOP_OPS = 8


class Fields:
    """``a  b  c`` laid out at the console's width, a line break only between fields, never inside one
    (``torch 2.13.0+cpu`` stays whole)."""

    def __init__(self, fields: list[str], style: str | None = None, first_style: str | None = None):
        self.fields = fields
        self.style = style
        self.first_style = first_style

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        width = 0 if options.no_wrap else options.max_width
        lines: list[list[str]] = [[]]
        used = 0
        for f in self.fields:
            extra = len(f) + (2 if lines[-1] else 0)
            if lines[-1] and width and used + extra > width:
                lines.append([])
                used, extra = 0, len(f)
            lines[-1].append(f)
            used += extra
        for i, parts in enumerate(lines):
            t = Text("  ".join(parts), style=self.style or "")
            if i == 0 and self.first_style:
                t.stylize(self.first_style, 0, len(parts[0]))
            if width:  # laid out to the console; in soft-wrap mode (a pipe) the line stays whole, never cropped
                t.no_wrap, t.overflow = True, "fold"
            yield t


def summary_line(report, verdict_summary: str | None = None) -> Text:
    """The line trace ends with: regions, breaks, skipped frames, mutations (and the CUDA-graph verdict when asked)."""
    return Text(report.summary() + (f"; CUDA graphs: {verdict_summary}" if verdict_summary else ""), style="verdict")


def trace_view(report, verdict_summary: str | None = None, *, summary: bool = True, verbose: bool = False) -> Group:
    """The whole report; ``verdict_summary`` (``--cudagraphs``) joins the last line; ``summary=False`` leaves it
    out (the CLI prints the CUDA-graph view first). Placeholders of a kind with more than :data:`FOLD_AT` of them
    (a training step's parameters, gradients and optimizer state) are one row with their count unless ``verbose``."""
    mode = "training" if report.training else "inference"
    parts = [Fields([display_path(report.path) or report.path, f"entry {report.entry}", f"device {report.device}", mode,
                     f"{report.backend}'s graphs", f"torch {report.torch_version}"], first_style="header")]
    if report.own_step:
        parts.append(Text(own_step_line(report), style="note"))
    diags = report.diagnostics()
    if diags:
        parts.append(diagnostics_view(diags))
    for region in report.regions:
        parts.append(_region_table(region, len(report.regions)))
        for g in (region.forward, region.backward):
            more = len(g.ops) - TOP_OPS if g is not None else 0
            if more > 0:
                parts.append(Text(f"{g.kind}: {more} more op kinds not shown (--format json lists every op)", style="note"))
        if region.forward is not None:
            title = "forward inputs" + (f" (region {region.index})" if len(report.regions) > 1 else "")
            parts.append(_placeholder_table(region.forward, title, verbose=verbose))
            folded = _folded_kinds(region.forward.placeholders) if not verbose else {}
            if folded:
                said = ", ".join(_many(k, n) for k, n in folded.items())
                parts.append(Text(f"folded: {said} (--verbose lists every one)", style="note"))
    if report.no_graph:
        parts.append(Text(f"torch.compile captured no graph: {report.no_graph}", style="verdict.bad"))
    if report.no_backward:
        parts.append(Text(f"training, but {report.no_backward}", style="note"))
    parts.append(Text(f"mutations: {report.mutations.verdict()}"))
    if summary:
        parts.append(summary_line(report, verdict_summary))
    return Group(*parts)


def own_step_line(report) -> str:
    """What graphtool did with a step that runs its own backward (or an optimizer's step alone)."""
    step = report.own_step
    if step["kind"] == "optimizer_step":
        return f"optimizer step: {step['evidence']}; graphtool ran no backward and left every .grad as the script set it"
    backward = next((r.index for r in report.regions if r.backward is not None), None)
    shown = f"; region {backward}'s backward graph is the one its backward() runs" if backward is not None else ""
    if backward is not None and "compiled autograd" in step["evidence"]:
        shown = (f"; region {backward}'s backward graph is what its backward() runs, traced into compiled autograd's "
                 "own graph (a region of its own here)")
    return f"training step: {step['evidence']}, so graphtool ran no backward of its own{shown}"


def _region_table(region, total: int) -> FitTable:
    title = f"region {region.index}" if total > 1 else "graphs"
    rows = []
    for g in (region.forward, region.backward):
        if g is None:
            continue
        kinds: dict[str, int] = {}
        for p in g.placeholders:
            kinds[p.kind] = kinds.get(p.kind, 0) + 1
        inputs = ", ".join(f"{n} {k}" for k, n in kinds.items())
        # one op a line: an op name is an identifier, never split across lines
        ops = "\n".join(f"{op.replace('aten.', '')} x{n}" for op, n in list(g.ops.items())[:TOP_OPS])
        rows.append((g.kind, str(g.nodes), inputs, ops))
    return FitTable(title, [Col("graph"), Col("nodes", justify="right"), Col("inputs"), Col("top ops", ident=True)], rows)


#: a kind with more placeholders than this is folded into one row (``--verbose`` lists them all)
FOLD_AT = 8


def _folded_kinds(placeholders) -> dict[str, int]:
    """kind -> count, for the kinds :func:`_placeholder_table` folds."""
    kinds: dict[str, int] = {}
    for p in placeholders:
        kinds[p.kind] = kinds.get(p.kind, 0) + 1
    return {k: n for k, n in kinds.items() if n > FOLD_AT}


_PLURAL = {"user_input": "user inputs", "optimizer_state": "optimizer state tensors", "saved": "saved tensors"}


def _many(kind: str, n: int) -> str:
    """``52 parameters``, ``156 optimizer state tensors``."""
    return f"{n} {_PLURAL.get(kind, kind.replace('_', ' ') + 's')}"


def _shape(p) -> str:
    return ("x".join(str(s) for s in p.shape) or "scalar") if p.shape is not None else "-"


def _placeholder_table(graph, title: str, *, verbose: bool = False) -> FitTable:
    folded = {} if verbose else _folded_kinds(graph.placeholders)
    rows = []
    for p in graph.placeholders:
        if p.kind not in folded:
            rows.append((p.graph_name, p.kind, p.name, _shape(p), p.dtype or "-", p.device or "-"))
            continue
        if folded[p.kind] is None:
            continue  # its kind's row is already there
        members = [q for q in graph.placeholders if q.kind == p.kind]
        n = folded[p.kind]
        folded[p.kind] = None

        def one(values, many):
            values = set(values)
            return values.pop() if len(values) == 1 else many

        shapes = one(map(_shape, members), f"{len({_shape(q) for q in members})} shapes")
        names = f"({_many(p.kind, n)})"
        rows.append((f"{members[0].graph_name} ...", p.kind, names, shapes, one((q.dtype or "-" for q in members), "mixed"),
                     one((q.device or "-" for q in members), "mixed")))
    cols = [Col("placeholder", drop=1), Col("kind", drop=3), Col("name", ident=True), Col("shape", drop=4),
            Col("dtype", drop=5), Col("device", drop=2)]
    return FitTable(title, cols, rows)
