"""``graphtool compile``'s views: the terminal's (80 columns and narrower, prose wrapped before it is printed so a
pipe keeps the same lines) and the report page's "Compile time" section (:func:`compile_section`)."""

from __future__ import annotations

from html import escape

from rich.console import Group
from rich.text import Text

from graphtool.analysis.compile_phases import PHASES
from graphtool.display_paths import display_path
from graphtool.render.tables import Col, FitTable, wrapped
from graphtool.text import count

WIDTH = 78  # prose is wrapped here: the view reads the same at 80 columns and in a pipe


def seconds(x) -> str:
    """A duration as the views write it.

    >>> seconds(None), seconds(0.0123), seconds(4.567), seconds(69.61)
    ('-', '12.3 ms', '4.57 s', '69.6 s')
    """
    if x is None:
        return "-"
    if x < 0.1:
        return f"{x * 1000:.1f} ms"
    if x < 10:
        return f"{x:.2f} s"
    return f"{x:.1f} s"


def _pct(part: float, whole: float) -> str:
    return f"{part / whole * 100:.0f}%" if whole else "-"


def _lines(text: str, first: str = "  ", rest: str = "    ", style: str = "") -> list[Text]:
    return wrapped(text, WIDTH, first, rest, style)


def compile_view(report) -> Group:
    full = report.full
    what = "training step" if report.training else "forward"
    mode = f", mode {report.mode}" if report.mode and report.mode != "default" else ""
    caches = "caches off" if report.caches == "off" else "an empty cache"
    said = [f"{report.backend}{mode}", what if report.training is not None else None, report.device,
            f"torch {report.torch_version}" if report.torch_version else None, caches]
    parts: list = _lines(f"{display_path(report.path)} ({', '.join(s for s in said if s)})", "", "  ", "header")
    rows = [("eager step", seconds(full.eager_step_seconds), "")]
    if full.first_call_seconds is not None:
        rows.append(("first compiled call", seconds(full.first_call_seconds), f"+{seconds(full.seconds)} over eager: the compile"))
    if full.step_seconds is not None:
        rows.append(("compiled step", seconds(full.step_seconds), ""))
    if report.warm is not None and report.warm.first_call_seconds is not None:
        hits = report.warm.cache()
        rows.append(("warm first call", seconds(report.warm.first_call_seconds),
                     f"caches on: {hits.get('fx_graph_hits', 0)} FX graph, {hits.get('aot_autograd_hits', 0)} AOT hits"))
    parts.append(FitTable(None, [Col("", ident=True), Col("time", ident=True, justify="right"), Col("", drop=1)], rows))
    if full.frames:
        parts += _phases(full)
        parts += _frames(full)
    if report.modules:
        parts.append(Text("Biggest modules (op nodes of the whole graph)", style="header"))
        parts.append(FitTable(None, [Col("module", ident=True, breaks="."), Col("class", ident=True),
                                     Col("nodes", ident=True, justify="right"), Col("share", justify="right")],
                              [(m.fqn, f"{m.count} x {m.cls}" if m.count > 1 else m.cls,
                                f"{m.nodes} each" if m.count > 1 else str(m.nodes),
                                f"{m.share * m.count * 100:.0f}%") for m in report.modules]))
    parts += _blocks(report)
    if report.regional is not None:
        parts += _regional(report)
    advice = report.advice()
    if advice:
        parts.append(Text("Advice", style="header"))
        for a in advice:
            parts += _lines(a.text, "  - ", "    ")
            for line in (a.code or "").splitlines():
                parts.append(Text(f"    {line}", style="verdict"))
    note = report.gpu_note()
    if note:
        parts += _lines(note, "note: ", "  ", "note")
    if report.stopped is not None:  # the message itself goes to stderr (the CLI says it); here, that the view is partial
        parts.append(Text("(stopped early: what finished is above)" if report.stopped.kind == "timeout" else
                          "(the compile failed: what finished is above)", style="finding"))
    return Group(*parts)


def _phases(run) -> list:
    p = run.phases()
    total = sum(p.values())
    out = [Text(f"Where the compile went (torch's own timers, {seconds(total)})", style="header")]
    rows = [(ph.title, f"{p.get(ph.key, 0.0):.2f}", _pct(p.get(ph.key, 0.0), total)) for ph in PHASES]
    out.append(FitTable(None, [Col("phase", ident=True), Col("seconds", ident=True, justify="right"),
                               Col("share", ident=True, justify="right")], rows))
    if run.inline_cpp_seconds >= 0.05:
        out += _lines(f"code generation includes {seconds(run.inline_cpp_seconds)} of C++ kernel compiles torch ran while "
                      "generating code (its compile_file events), not in its pool", "  ", "  ")
    kinds = run.by_kind()
    if kinds.get("backward"):
        out.append(Text(f"  forward {seconds(kinds['forward'])}, backward {seconds(kinds['backward'])} "
                        "(compiled at the first backward)"))
    return out


def _frames(run) -> list:
    rows = []
    for f in run.frames:
        where = f"{f.name or '?'} {_short(f.file)}:{f.line}" if f.file else (f.name or "")
        note = f.fail or (f"recompiled: {f.recompile_reason}" if f.recompile_reason else "")
        rows.append((f.compile_id, f.kind, f"{f.seconds:.2f}" if f.seconds is not None else "-",
                     str(f.nodes) if f.nodes is not None else "-", where, note))
    cols = [Col("id", ident=True), Col("kind", ident=True), Col("seconds", ident=True, justify="right"),
            Col("nodes", ident=True, justify="right"), Col("frame", ident=True, breaks="/ "), Col("note", drop=1)]
    if not any(r[5] for r in rows):
        cols, rows = cols[:5], [r[:5] for r in rows]
    return [Text("Frames (one row per compile id and direction)", style="header"), FitTable(None, cols, rows)]


def _short(path: str) -> str:
    """A library's file from its package on (``transformers/utils/generic.py``), the user's as display_path has it."""
    marker = "site-packages/"
    return path[path.rindex(marker) + len(marker):] if marker in path else display_path(path) or path


def _blocks(report) -> list:
    if not report.blocks:
        if report.regional_asked:
            return _lines("no repeated blocks: no class of module repeats with identical dynamo graphs, so there is "
                          "nothing to compile one by one", "", "  ", "note")
        return []
    out = [Text("Repeated blocks (each instance compiled alone by dynamo)", style="header")]
    for b in report.blocks:
        share = f", {b.share * 100:.0f}% of the model's nodes" if b.share is not None else ""
        if b.identical:
            out += _lines(f"{b.label()}, identical graphs{share}", "  ", "    ", "verdict")
        else:
            out += _lines(f"{b.label()}: no two make the same graph{share}", "  ", "    ")
        for m in b.near_misses:
            from graphtool.analysis.repeated_blocks import span

            out += _lines(f"{span(list(m.fqns))} differ: {m.why}", "    near miss: ", "      ")
        for r in b.recompiles:
            out += _lines(f"{r.fqn} compiled again alone{f': {r.reason}' if r.reason else ''}", "    recompiles: ", "      ")
    return out


def _regional(report) -> list:
    full, reg = report.full, report.regional
    out = [Text(f"Whole against regional ({len(reg.blocks)} blocks compiled one by one)", style="header")]
    rows = [("eager", "-", "-", seconds(full.eager_step_seconds), ""),
            ("whole", seconds(full.seconds), seconds(full.cpu_seconds), seconds(full.step_seconds), count(len(full.frames), "frame")),
            ("regional", seconds(reg.seconds), seconds(reg.cpu_seconds), seconds(reg.step_seconds), count(len(reg.frames), "frame"))]
    out.append(FitTable(None, [Col("", ident=True), Col("compile", ident=True, justify="right"),
                               Col("cpu", ident=True, drop=2, justify="right"), Col("step", ident=True, justify="right"),
                               Col("torch", drop=1)], rows))
    if report.hazards:
        out.append(Text("  hazards found on this model:"))
        for h in report.hazards:
            out += _lines(f"{h.text}{f' ({h.seen_in})' if h.seen_in else ''}", "  - ", "    ")
    else:
        out.append(Text("  hazards found on this model: none"))
    return out


def compile_section(report) -> str:
    """The report page's "Compile time" section: the same facts as the terminal's view, as HTML.

    >>> from graphtool.analysis.compile_time import CompileReport, CompileRun
    >>> r = CompileReport("m.py", None, "0", "2.13", "cpu", "inductor", None, True, "off",
    ...                   CompileRun("whole", first_call_seconds=3.0, eager_step_seconds=0.5))
    >>> "<h2>Compile time" in compile_section(r) and "2.50 s" in compile_section(r)
    True
    """
    from graphtool.render.report import _section, _table

    full = report.full
    rows = [["eager step", seconds(full.eager_step_seconds)],
            ["first compiled call", seconds(full.first_call_seconds)],
            ["the compile (first call over eager)", seconds(full.seconds)],
            ["compiled step", seconds(full.step_seconds)]]
    if report.regional is not None:
        rows += [["regional compile", seconds(report.regional.seconds)], ["regional step", seconds(report.regional.step_seconds)]]
    body = (f'<p class="note">{escape(report.backend)}, {escape(report.device or "?")}, torch '
            f'{escape(report.torch_version or "?")}, caches {"off" if report.caches == "off" else "empty at first"}</p>'
            + _table(["", "time"], rows))
    if full.frames:
        p = full.phases()
        total = sum(p.values())
        body += _table(["phase", "seconds", "share"], [[escape(ph.title), f"{p[ph.key]:.2f}", _pct(p[ph.key], total)] for ph in PHASES])
        body += _table(["id", "kind", "seconds", "nodes", "frame"],
                       [[escape(f.compile_id), f.kind, f"{f.seconds:.2f}" if f.seconds is not None else "-",
                         str(f.nodes) if f.nodes is not None else "-",
                         escape(f"{f.name or ''} {display_path(f.file) or ''}:{f.line or ''}".strip())] for f in full.frames])
    for b in report.blocks:
        share = f", {b.share * 100:.0f}% of the model's nodes" if b.share is not None else ""
        body += f'<p>{escape(b.label())}{", identical graphs" if b.identical else ""}{escape(share)}</p>'
        body += "".join(f'<p class="note">near miss: {escape(", ".join(m.fqns))}: {escape(m.why)}</p>' for m in b.near_misses)
    body += "".join(f'<p class="note">hazard: {escape(h.text)}</p>' for h in report.hazards)
    body += "".join(f'<p class="note">{escape(a.text)}</p>' + (f"<pre>{escape(a.code)}</pre>" if a.code else "")
                    for a in report.advice())
    if report.gpu_note():
        body += f'<p class="note">{escape(report.gpu_note())}</p>'
    return _section("compile", "Compile time", body)
