"""The rich view of ``graphtool memory``: eager and compiled saved tensors side by side."""

from __future__ import annotations

from rich.console import Group
from rich.text import Text

from graphtool.analysis.memory.saved import format_bytes, recomputed_by_line
from graphtool.display_paths import display_path
from graphtool.render.tables import Col, FitTable

_KIND_LABELS = (
    ("activation", "activations"),
    ("parameter", "parameters (held anyway)"),
    ("buffer", "buffers (held anyway)"),
    ("input", "inputs (held anyway)"),
)


def _src(source) -> str:
    """``models/m.py:9``; a file of an installed package from its package on (``transformers/...``)."""
    if not source:
        return "-"
    path = display_path(source.file) or source.file
    _, sep, inside = path.replace("\\", "/").rpartition("site-packages/")
    return f"{inside if sep else path}:{source.line}"


def _amount(bytes_: int, tensors: int) -> str:
    return f"{format_bytes(bytes_)} ({tensors})" if tensors else "-"


def _module(fqn) -> str:
    return "(model)" if fqn == "" else fqn or "-"


def _key(group, by: str) -> str:
    return _src(group.source) if by == "line" and group.source else group.key


#: how each kind of cell may break when a table is narrower than its cells: paths after ``/``,
#: module FQNs after ``.``, op names after ``_`` or ``.``; a ``file.py:123`` is never split
_BREAKS = {"line": "/", "where": "/", "module": ".", "op": "_."}


def _table(title: str, *columns: str, right: tuple[str, ...] = (), rows: list, caption: str | None = None) -> FitTable:
    """A table whose identifiers (paths, FQNs, ops), headers and amounts never break mid-name."""
    cols = [Col(c, ident=True, justify="right" if c in right else "left", breaks=_BREAKS.get(c, "")) for c in columns]
    return FitTable(title, cols, rows, caption=caption)


def _more(n: int, what: str = "") -> str | None:
    return f"{n} more{what} in --format json" if n > 0 else None


def _groups_table(groups, title: str, by: str, backend: str, top: int) -> FitTable:
    rows = [(_key(g, by), _amount(g.eager_bytes, g.eager_tensors), _amount(g.compiled_bytes, g.compiled_tensors))
            for g in groups[:top]]
    return _table(title, by, "eager", f"compiled ({backend})", right=("eager", f"compiled ({backend})"), rows=rows,
                  caption=_more(len(groups) - top))


_SHORT_DTYPES = {"float32": "f32", "float16": "f16", "bfloat16": "bf16", "float64": "f64", "int64": "i64",
                 "int32": "i32", "int8": "i8", "uint8": "u8", "bool": "b8"}


def _tensor(t) -> str:
    """``bf16[2, 512, 4096]``, as torch prints graph values."""
    return f"{_SHORT_DTYPES.get(t.dtype, t.dtype)}[{', '.join(map(str, t.shape))}]"


def largest_activations(side) -> list:
    """A column's saved activations, largest first by the size the table shows (a view counted in
    another tensor's storage included), then in the order they were saved."""
    return sorted((t for t in side.tensors if t.kind == "activation"), key=lambda t: (-t.bytes, -t.counted_bytes, t.index))


def _tensors_table(side, title: str, top: int, *, region: bool) -> FitTable:
    acts = largest_activations(side)
    rows = []
    for t in acts[:top]:
        size = format_bytes(t.bytes) + (f"\n= {t.formula}" if t.formula else "")
        if t.shares_storage_with is not None:
            size += f"\n(counted in {side.tensors[t.shares_storage_with].name})"
        name = f"{t.name} (r{t.region})" if region and t.region else t.name
        op = (t.op or "-").replace("aten.", "").replace(".default", "")
        rows.append((name, _tensor(t), size, op, _src(t.source), _module(t.module)))
    # a narrow console drops where or module: the one that tells fewer rows apart (six mms of one
    # line in six modules keep the module)
    by_module = len({r[5] for r in rows}) > len({r[4] for r in rows})
    cols = [Col("name", ident=True), Col("tensor", ident=True), Col("bytes", justify="right"),
            Col("op", ident=True, breaks=_BREAKS["op"]),
            Col("where", ident=True, drop=1 if by_module else None, breaks=_BREAKS["where"]),
            Col("module", ident=True, drop=None if by_module else 1, breaks=_BREAKS["module"])]
    return FitTable(title, cols, rows, caption=_more(len(acts) - top))


def _symbol_legend(symbols: dict) -> list[Text]:
    """``s0 = input_ids.size(1)``: what each size symbol of a --dynamic formula stands for."""
    return [Text(f"{symbol} = {source}", style="note") for symbol, source in symbols.items()]


def memory_view(report, *, top: int = 10, tensors: bool = True) -> Group:
    """The verdict, what training holds, saved bytes per kind in both columns, the largest groups,
    what is recomputed, and (``tensors``) the largest saved activations of each column."""
    parts = [Text(report.verdict(), style="verdict")]
    compiled = f"compiled ({report.backend})"
    held = [(label, str(h.tensors), format_bytes(h.bytes))
            for label, h in (("parameters", report.parameters), ("gradients", report.gradients), ("buffers", report.buffers))]
    parts.append(_table(f"held for training on {report.device}", "", "tensors", "bytes", right=("tensors", "bytes"), rows=held))
    if not report.training:
        return Group(*parts)

    saved = [(label, _amount(*report.eager.by_kind[kind]), _amount(*report.compiled.by_kind[kind])) for kind, label in _KIND_LABELS]
    saved.append(("total, each storage once", format_bytes(report.eager.bytes), format_bytes(report.compiled.bytes)))
    saved.append(("tensors / storages", f"{len(report.eager.tensors)} / {report.eager.storages}",
                  f"{len(report.compiled.tensors)} / {report.compiled.storages}"))
    if report.eager_not_measured:  # an empty column is not "nothing saved": the note under the tables says why
        saved = [(label, "not measured", compiled_cell) for label, _, compiled_cell in saved]
    if report.compiled.formula:
        saved.append(("activations, as a formula", "-", report.compiled.formula))
    parts.append(_table("saved for backward", "", "eager", compiled, right=("eager", compiled), rows=saved))
    parts += _symbol_legend(report.symbols)  # next to the formula that uses them
    parts.append(Text(f"counting: {report.counting}", style="note"))

    title = f"activations by {report.by}" + (f" (depth {report.depth})" if report.by == "module" and report.depth else "")
    if report.groups:
        parts.append(_groups_table(report.groups, title, report.by, report.backend, top))
    if report.by != "line" and report.top_lines:
        parts.append(_groups_table(report.top_lines, "top lines", "line", report.backend, top))

    if len(report.regions) > 1:
        rows = [(str(r.region), _amount(r.bytes, r.tensors), format_bytes(r.activation_bytes), str(r.recomputed))
                for r in report.regions]
        parts.append(_table("compiled regions", "region", "saved", "activations", "recomputed ops",
                            right=("saved", "activations", "recomputed ops"), rows=rows))

    lines = recomputed_by_line(report.recomputed)
    if lines:
        rows = [(_src(source), str(n), str(views), (ckpt or "-").lower().replace("_", " ")) for source, n, views, ckpt in lines[:top]]
        parts.append(_table(f"recomputed in backward instead of saved ({report.backend})", "where", "ops", "of them views",
                            "checkpoint", right=("ops", "of them views"), rows=rows, caption=_more(len(lines) - top, " lines")))
    eager_lines = recomputed_by_line(report.eager_recomputed)
    if eager_lines:
        rows = [(_src(source), str(n)) for source, n, _views, _ckpt in eager_lines[:top]]
        parts.append(_table("run inside torch.utils.checkpoint (eager recomputes them in backward)", "where", "ops",
                            right=("ops",), rows=rows))

    if tensors:
        for side, title in ((report.eager, "eager"), (report.compiled, compiled)):
            if side.by_kind["activation"][1]:
                parts.append(_tensors_table(side, f"largest saved activations, {title}", top,
                                            region=len(report.regions) > 1))
    for note in report.notes:
        parts.append(Text(f"note: {note}", style="note"))
    return Group(*parts)
