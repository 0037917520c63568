"""The ``graphtool log`` view: a desync between ranks first, then what the log could not read, the run's one-line
summary, the ranks, each graph-break site and recompile as a diagnostic at the user's line, compile time by phase
and frame, caches, CUDA graphs, and (``--against``) the prediction beside the run; and the same as an HTML page
with each compile's AOT graphs drawn by ``report``'s viewer.
"""

from __future__ import annotations

from html import escape

from rich.console import Group
from rich.text import Text

from graphtool.analysis.compile_phases import PHASES
from graphtool.display_paths import display_path
from graphtool.render.diagnostics import DiagnosticView, Hanging
from graphtool.render.tables import Col, FitTable
from graphtool.text import count

#: frames listed in the compile-time table (the rest summed in one line)
TOP_FRAMES = 8
_DESYNC_HELP = ("ranks that compile differently run their collectives in another order or at another time: the "
                "others wait in an all-reduce it never joins (a hang), or a recompile stalls one rank each step")


def _n(value: int | None) -> str:
    """A count the log may not give (None: a note says why)."""
    return "-" if value is None else str(value)


def _s(seconds: float | None) -> str:
    if not seconds:
        return "-" if seconds is None or seconds == 0 else "0"
    return f"{seconds:.1f}" if seconds >= 0.95 else f"{seconds:.2f}"


def _place(file: str | None, line: int | None) -> str:
    """``record.py:52``: a table names the file, the diagnostics and the JSON give its whole path."""
    import os

    return f"{os.path.basename(file)}:{line}" if file else "?"


def _where(file: str | None, line: int | None) -> str:
    return f"{display_path(file) or file}:{line}" if file else "?"


def summary_line(facts) -> str:
    """The run's one line (:meth:`~graphtool.analysis.run_log.facts.RunLog.summary`)."""
    return facts.summary()


def _header(result) -> str:
    f = result.facts
    files = f.log.files
    ranks = sorted({x.rank for x in files if x.rank is not None})
    who = ""
    if ranks:
        from graphtool.analysis.run_log.facts import ranks_text

        who = f" ({ranks_text(ranks)})"
    torch = f", torch {f.log.torch_version}" if f.log.torch_version else ""
    return f"{count(len(files), 'TORCH_TRACE file')}{who}{torch}, {f.log.lines:,} lines"


# -- diagnostics ---------------------------------------------------------------------------------------------------


def diagnostics(facts) -> list[tuple]:
    """Every finding as ``(Diagnostic, notes)``: breaks by site (GT-B001), recompiles by frame and guard (GT-B003),
    frames run eagerly past recompile_limit or skipped (GT-B002)."""
    import re

    from graphtool.analysis import diagnostics as dg
    from graphtool.analysis.run_log.facts import ranks_text

    out = []
    for b in facts.graph_breaks:
        d = dg.graph_break(b.reason, b.file, b.line, code=b.gb_id, hint=b.hint)
        seen = f"{_times(b.count)}, in {', '.join(b.frames) or '?'} ({', '.join(b.compile_ids)})"
        if facts.distributed:
            seen += f"; {ranks_text(b.ranks)}"
        notes = [("seen", seen)]
        if b.user_file:
            notes.append(("called from", _where(b.user_file, b.user_line)))
        if b.skips_frame:
            notes.append(("", "dynamo gave up on the whole frame: it runs eagerly"))
        out.append((d, tuple(notes)))
    groups: dict[tuple, list] = {}
    for r in facts.recompiles:
        why = re.sub(r"^\s*\d+/\d+:\s*", "", r.reason)
        groups.setdefault((r.frame, r.file, r.line, why), []).append(r)
    for (frame, file, line, why), rs in groups.items():
        d = dg.recompile(frame or "?", file, line, why)
        seen = f"{_times(len(rs))} ({', '.join(x.compile_id for x in rs)})"
        if facts.distributed:
            seen += f"; {ranks_text({x.rank for x in rs})}"
        notes = [("seen", seen)]
        more = sorted({m for x in rs for m in x.reasons[1:]})
        if more:
            notes.append(("also failed", "; ".join(more)))
        out.append((d, tuple(notes)))
    for s in (*facts.recompile_limit, *facts.skipped_frames):
        reason = "recompile_limit reached" if s.recompile_limit else s.reason
        d = dg.skipped_frame(s.frame, s.file, s.line, reason)
        notes = [("seen", f"compile {s.compile_id}" + (f", {ranks_text([s.rank])}" if facts.distributed else ""))]
        if s.recompile_limit:
            notes.append(("", "torch refused to compile it again: every later call of this frame runs eagerly, "
                              "with no error (raise torch._dynamo.config.recompile_limit, or remove the guard's cause)"))
        out.append((d, tuple(notes)))
    return out


def _times(n: int) -> str:
    return "once" if n == 1 else "twice" if n == 2 else f"{n} times"


# -- the terminal view ---------------------------------------------------------------------------------------------


def _desync_part(facts) -> list:
    parts: list = []
    for d in facts.desync:
        parts.append(Hanging("desync: ", d.message, rest="    ", style="verdict.bad"))
        if d.kind == "graph_breaks":  # the message says it all
            continue
        for rank, what in sorted(d.ranks.items(), key=lambda kv: int(kv[0]) if kv[0].lstrip("-").isdigit() else 0):
            parts.append(Hanging(f"  rank {rank}: ", what, rest="    "))
    if facts.desync:
        parts.append(Hanging("  = help: ", _DESYNC_HELP, rest="    "))
    return parts


def _damage_part(info) -> list:
    parts: list = []
    if info.bad_payloads:
        ex = info.bad_payload_examples[0] if info.bad_payload_examples else None
        at = f" (first: {display_path(ex.file)}:{ex.line}, {ex.record}: {ex.why})" if ex else ""
        parts.append(Hanging("log damage: ", f"{count(info.bad_payloads, 'payload')} not trusted{at}; the facts they held "
                             "are left out", rest="    ", style="warning"))
    if info.bad_lines:
        ex = info.bad_line_examples[0] if info.bad_line_examples else None
        at = f" (first: {display_path(ex.file)}:{ex.line}: {ex.why})" if ex else ""
        parts.append(Hanging("log damage: ", f"{count(info.bad_lines, 'line')} not read{at}", rest="    ", style="warning"))
    for u in info.unknown:
        what = "envelope key" if u["kind"] == "envelope key" else "record"
        parts.append(Hanging("unknown: ", f"{what} {u['key']!r} in {count(u['count'], 'record')} (first: "
                             f"{display_path(u['file'])}:{u['line']}): from a newer torch? read as far as known",
                             rest="    ", style="note"))
    return parts


def _ranks_table(facts) -> FitTable | None:
    if not facts.distributed and len(facts.ranks) < 2:
        return None
    # calls captured per rank: ranks whose graphs hold different numbers of torch calls compiled different code
    rows = [(("-" if r.rank is None else str(r.rank)), str(r.graphs_compiled), str(r.graph_breaks), _n(r.calls_captured),
             str(r.recompiles), _s(r.compile_seconds), ", ".join(display_path(f) or f for f in r.files)) for r in facts.ranks]
    cols = [Col("rank"), Col("graphs", justify="right"), Col("breaks", justify="right"), Col("calls", justify="right"),
            Col("recompiles", justify="right"), Col("compile s", justify="right"), Col("file", ident=True, drop=1, breaks="/")]
    return FitTable("ranks", cols, rows)


def _time_part(facts) -> list:
    t = facts.compile_time
    if not t.timed:
        return [Text("compile time: no compilation_metrics in the log", style="note")]
    every = ", every rank" if facts.distributed else ""
    parts: list = [Hanging("compile time: ", f"{_s(t.seconds)} s{every}: forward {_s(t.forward_seconds)} s, lazy "
                           f"backward {_s(t.backward_seconds)} s", rest="    ", style="header")]
    rows = []
    for p in PHASES:
        fw, bw = t.forward_phases.get(p.key, 0.0), t.backward_phases.get(p.key, 0.0)
        share = (fw + bw) / t.seconds if t.seconds else 0.0
        rows.append((p.title, _s(fw), _s(bw) if t.backward_seconds else "-", f"{share:.0%}"))
    parts.append(FitTable(None, [Col("phase"), Col("forward s", justify="right"), Col("backward s", justify="right", drop=1),
                                 Col("share", justify="right")], rows))
    frames = t.frames[:TOP_FRAMES]
    rows = [(fr.frame or "?", _place(fr.file, fr.line), str(fr.compiles), _s(fr.seconds + fr.backward_seconds))
            for fr in frames]
    parts.append(FitTable(None, [Col("frame", ident=True), Col("where", ident=True, breaks="/", drop=1),
                                 Col("compiles", justify="right"), Col("seconds", justify="right")], rows))
    if len(t.frames) > TOP_FRAMES:
        rest = t.frames[TOP_FRAMES:]
        parts.append(Text(f"  and {count(len(rest), 'more frame')}: "
                          f"{_s(sum(f.seconds + f.backward_seconds for f in rest))} s", style="note"))
    c = t.cache
    if not any(c.values()):
        parts.append(Text("caches: no FX graph or AOT autograd cache lookup logged (caches off?)"))
    else:
        parts.append(Text(f"caches: FX graph {c.get('fx_graph_hits', 0)} hit{'s' if c.get('fx_graph_hits', 0) != 1 else ''}, "
                          f"{c.get('fx_graph_misses', 0)} miss{'es' if c.get('fx_graph_misses', 0) != 1 else ''}; AOT autograd "
                          f"{c.get('aot_autograd_hits', 0)} hit{'s' if c.get('aot_autograd_hits', 0) != 1 else ''}, "
                          f"{c.get('aot_autograd_misses', 0)} miss{'es' if c.get('aot_autograd_misses', 0) != 1 else ''}"))
    if t.runtime:
        parts.append(Text("run time (not compile time): " + ", ".join(f"{k} {_s(v)} s" for k, v in t.runtime.items())))
    return parts


def _cudagraph_part(facts) -> list:
    skips = facts.cudagraph_skips
    if not skips:
        return [Hanging("CUDA graphs: ", "no skip logged. A log holds only the skips of compiles that asked for CUDA "
                        "graphs (mode=\"reduce-overhead\"), not run-time re-records nor graph-partition skips "
                        "(pytorch#193044)", rest="    ")]
    rows = [(s.compile_id + (f" (rank {s.rank})" if s.rank is not None else ""), s.frame or "?", s.graph, s.reason)
            for s in skips]
    return [Text(f"CUDA graphs: {count(len(skips), 'graph')} skipped", style="header"),
            FitTable(None, [Col("compile", ident=True), Col("frame", ident=True, drop=1), Col("graph", drop=2), Col("reason")], rows),
            Hanging("  note: ", "a log cannot hold run-time re-records nor graph-partition skips (pytorch#193044)",
                    rest="    ", style="note")]


def _against_part(comparison) -> list:
    if comparison is None:
        return []
    pred = comparison.prediction
    parts: list = [Hanging("beside the prediction: ", f"graphtool on {display_path(pred.script) or pred.script} (torch "
                           f"{pred.torch_version}, one call): {count(comparison.disagreements, 'disagreement')}",
                           rest="    ", style="header")]
    rows = []
    for r in comparison.rows:
        what = r.what
        if ":" in what and not what.startswith("backend"):
            path, _, line = what.rpartition(":")
            what = f"{display_path(path) or path}:{line}"
        rows.append((r.fact, what, r.predicted, r.seen, "agrees" if r.agree else "DIFFERS"))
    parts.append(FitTable(None, [Col("fact"), Col("what", ident=True, breaks="/"), Col("graphtool"), Col("the run"),
                                 Col("")], rows))
    for r in comparison.rows:
        if not r.agree and r.cause:
            label = f"{r.fact} {r.what}".strip()
            parts.append(Hanging(f"  {label}: likely cause: ", r.cause, rest="    "))
    return parts


def log_view(result) -> Group:
    """What ``graphtool log`` prints in a terminal, at any width."""
    facts = result.facts
    parts: list = [Text(_header(result), style="header")]
    parts += _desync_part(facts)
    parts += _damage_part(facts.log)
    style = "verdict.bad" if facts.desync else "verdict"
    parts.append(Hanging("", summary_line(facts), rest="    ", style=style))
    table = _ranks_table(facts)
    if table is not None:
        parts.append(table)
    for d, notes in diagnostics(facts):
        parts.append(DiagnosticView(d, notes))
    parts += _time_part(facts)
    parts += _cudagraph_part(facts)
    parts += _against_part(result.against)
    for note in (*facts.notes, *result.notes):
        parts.append(Hanging("note: ", note, rest="    ", style="note"))
    return Group(*parts)


# -- the page ------------------------------------------------------------------------------------------------------


def _section(sid: str, title: str, body: str, n: int | None = None) -> str:
    from graphtool.render.report import _section as section  # the page's modules load only when a page is made

    return section(sid, title, body, n)


def _table(head: list[str], rows: list[list], cls: str = "") -> str:
    """The report page's table, whose cells are HTML: these are plain values, escaped here."""
    from graphtool.render.report import _table as table

    return table(head, [[escape(str(c)) for c in r] for r in rows], cls)


def log_sections(result) -> list[str]:
    """The page's sections (desync, findings, ranks, compile time, CUDA graphs, compiles, the prediction, the log)."""
    from graphtool.render.diagnostics import diagnostic_lines

    f = result.facts
    out = []
    if f.desync:
        items = "".join(f'<li class="finding sev-error"><div class="head"><b>{escape(d.message)}</b></div>'
                        + "".join(f'<div class="msg">rank {escape(k)}: {escape(v)}</div>' for k, v in d.ranks.items())
                        + "</li>" for d in f.desync)
        out.append(_section("desync", "Desync between ranks", f'<ol class="findings">{items}</ol>'
                            f'<p class="note">{escape(_DESYNC_HELP)}</p>', len(f.desync)))
    found = diagnostics(f)
    text = "\n".join("\n".join(t.plain for t in diagnostic_lines(d, 0, notes)) for d, notes in found)
    out.append(_section("findings", "Graph breaks, recompiles, frames run eagerly",
                        f'<pre class="diagnostics">{escape(text)}</pre>' if found else '<p class="ok">None in the log.</p>',
                        len(found)))
    if len(f.ranks) > 1 or f.distributed:
        out.append(_section("ranks", "Ranks", _table(["rank", "graphs", "breaks", "calls captured", "recompiles", "compile s",
                                                      "file"], [
            ["-" if r.rank is None else r.rank, r.graphs_compiled, r.graph_breaks, _n(r.calls_captured), r.recompiles,
             _s(r.compile_seconds),
             ", ".join(r.files)] for r in f.ranks])))
    t = f.compile_time
    phases = [[p.title, _s(t.forward_phases.get(p.key, 0.0)), _s(t.backward_phases.get(p.key, 0.0))] for p in PHASES]
    frames = [[fr.frame or "?", _where(fr.file, fr.line), fr.compiles, _s(fr.seconds), _s(fr.backward_seconds)] for fr in t.frames]
    out.append(_section("compile-time", f"Compile time: {_s(t.seconds)} s",
                        _table(["phase", "forward s", "backward s"], phases)
                        + _table(["frame", "where", "compiles", "seconds", "backward s"], frames)))
    from graphtool.analysis.run_log.facts import CUDAGRAPH_LIMITS

    skips = [[s.rank if s.rank is not None else "-", s.compile_id, s.frame or "?", s.graph, s.reason] for s in f.cudagraph_skips]
    body = (_table(["rank", "compile", "frame", "graph", "reason"], skips) if skips
            else '<p class="ok">No CUDA-graph skip logged.</p>')
    body += "".join(f'<p class="note">{escape(n)}</p>' for n in CUDAGRAPH_LIMITS)
    out.append(_section("cudagraphs", "CUDA graphs", body, len(skips)))
    compiles = [[c.rank if c.rank is not None else "-", c.compile_id, c.function or "?", _where(c.file, c.line), c.attempts,
                 c.graphs, c.outcome, _s(c.seconds), _s(c.backward_seconds)] for c in f.compiles]
    out.append(_section("compiles", "Compiles", _table(["rank", "compile", "frame", "where", "attempts", "graphs", "outcome",
                                                        "seconds", "backward s"], compiles), len(compiles)))
    if result.against is not None:
        from graphtool.render.report import against_section

        out.append(against_section(result.against))
    info = f.log
    files = [[x.path, "-" if x.rank is None else x.rank, x.lines, x.records, "gzip" if x.compressed else ""] for x in info.files]
    damage = [[d.file, d.line, d.record or "", d.why] for d in (*info.bad_payload_examples, *info.bad_line_examples)]
    damage += [[u["file"], u["line"], u["key"], f"unknown {u['kind']} ({u['count']} records)"] for u in info.unknown]
    body = _table(["file", "rank", "lines", "records", ""], files)
    if damage:
        body += (f"<p>{info.bad_payloads} payloads not trusted, {info.bad_lines} lines not read:</p>"
                 + _table(["file", "line", "record", "what"], damage))
    out.append(_section("log", "The log", body))
    return out


def format_log_page(result) -> str:
    """One self-contained page: the sections, and each compile's AOT graphs in ``report``'s viewer."""
    import json

    from graphtool.render.report import _first_paint, _packed, format_page, viewer

    pictures, svgs = [], []
    for p in result.pictures:
        levels = []
        for lv in p.levels:
            levels.append({"name": lv.name, "depth": lv.depth, "boxes": lv.boxes, "svg": len(svgs)})
            svgs.append(_packed(lv.svg))
        region = f"{p.rank}:{p.compile_id}"  # a compile's forward and backward: the viewer links their saved tensors
        pictures.append({"id": f"c{len(pictures)}", "region": region, "graph": p.graph, "nodes": p.nodes,
                         "drawn": p.nodes, "edges": p.edges, "default": p.default, "levels": levels, "packed": len(svgs)})
        svgs.append(_packed(json.dumps({"facts": p.facts, "members": [lv.members for lv in p.levels]},
                                       separators=(",", ":"), default=str)))
    sections = log_sections(result)
    if result.pictures:
        tabs = "".join(f'<button type="button" class="tab{" active" if i == 0 else ""}" data-picture="{i}">'
                       f'{escape(p.label)} <small>{p.nodes} nodes</small></button>' for i, p in enumerate(result.pictures))
        first = _first_paint(result.pictures[0])
        sections.insert(1 if result.facts.desync else 0, _section("graphs", "AOT graphs", viewer(tabs, first)))
    page = format_page({"title": result.title, "summary": summary_line(result.facts), "sections": sections,
                        "pictures": pictures, "svgs": svgs, "subtitle": _header(result),
                        "notes": list(result.facts.notes) + list(result.notes)})
    return page.replace("<title>graphtool report: ", "<title>graphtool log: ", 1).replace(
        "<h1>graphtool report: ", "<h1>graphtool log: ", 1)
