"""``graphtool diff`` as text (rich, 80 columns and a pipe), SARIF 2.1.0, GitHub workflow commands, JUnit XML and
one HTML page with both sides. ``format_*`` functions return strings; nothing here prints.

The text view, in the order the diff is made::

    before: before.json (trace, torch 2.13.0)
    after:  after.json (trace, torch 2.15.0)
    examples/model.py
      graph breaks 2 -> 2: 1 added, 1 removed, 1 moved
        + examples/model.py:9 [gb0025] Call to `torch._dynamo.graph_break()`
        ~ examples/model.py:13 -> 15 [gb0059] Failed to trace builtin operator
      ...
    diff failed (new-breaks): 1 new graph break
"""

from __future__ import annotations

import json
import textwrap
from html import escape

from rich.console import Console, ConsoleOptions, RenderResult
from rich.text import Text

from graphtool.display_paths import display_path
from graphtool.render.lint import INFO_URI, SARIF_SCHEMA, _gh_data, _gh_prop, _sarif_location, quoteattr
from graphtool.render.lint import escape as xml_escape
from graphtool.text import count

_MARK_STYLE = {"+": "finding", "-": "fixed", "~": "note", " ": ""}


class _Lines:
    """Lines of ``(indent, text, style)``: each wraps between words with a hanging indent on a terminal, none in
    a pipe (a path or a ``file:line`` is never split either way)."""

    def __init__(self, lines: list[tuple[int, str, str]]):
        self.lines = lines

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        width = 0 if options.no_wrap else options.max_width
        for indent, text, style in self.lines:
            pad = " " * indent
            if width <= 0 or len(pad) + len(text) <= width:
                yield Text(pad + text, style=style)
                continue
            for ln in textwrap.wrap(text, width, initial_indent=pad, subsequent_indent=pad + "    ",
                                    break_long_words=False, break_on_hyphens=False):
                yield Text(ln, style=style)


def _where(file, line) -> str:
    return f"{display_path(file) or file}:{line}" if file else "unknown location"


def _break_line(mark: str, b, line_text: str | None = None) -> str:
    code = f" [{b.code}]" if b.code else ""
    times = f" ({b.count} times)" if b.count > 1 else ""
    return f"{mark} {line_text or _where(b.file, b.line)}{code} {b.reason}{times}"


def _side(doc) -> str:
    torch = f", torch {doc.torch_version}" if doc.torch_version else ""
    return f"{display_path(doc.name) or doc.name} ({doc.kind}{torch})"


def _n(value) -> str:
    return "-" if value is None else f"{value:g}" if isinstance(value, float) else str(value)


def _bytes(n) -> str:
    if n is None:
        return "-"
    for unit, size in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if abs(n) >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n:g} B"


def _arrow(c, fmt=_n) -> str:
    return f"{fmt(c.before)} -> {fmt(c.after)}" if c.changed else f"{fmt(c.after)} (unchanged)"


def _pct(c) -> str:
    return f" ({c.percent:+g}%)" if c.changed and c.percent is not None else ""


def model_lines(m) -> list[tuple[int, str, str]]:
    """One model's changes as ``(indent, text, style)`` lines, in the diff's order."""
    out: list[tuple[int, str, str]] = []
    b = m.breaks
    if b is not None:
        parts = [f"{len(b.added)} added", f"{len(b.removed)} removed", f"{len(b.moved)} moved"]
        out.append((2, f"graph breaks {b.before} -> {b.after}: " + ", ".join(parts), "warning" if b.added else ""))
        out += [(4, _break_line("+", x), "finding") for x in b.added]
        out += [(4, _break_line("-", x), "fixed") for x in b.removed]
        for mv in b.moved:
            same_file = mv.before.file == mv.after.file
            where = (f"{_where(mv.after.file, mv.before.line)} -> {mv.after.line}" if same_file
                     else f"{_where(mv.before.file, mv.before.line)} -> {_where(mv.after.file, mv.after.line)}")
            out.append((4, _break_line("~", mv.after, where), "note"))
        out += [(4, _break_line("+", a, _where(a.file, a.line)) + f" now {a.count} times, was {p.count}", "finding")
                for p, a in b.more_often]
    for label, fr in (("recompiles", m.recompiles), ("frames run eagerly", m.skipped_frames)):
        if fr is None:
            continue
        out.append((2, f"{label} {fr.before} -> {fr.after}" if fr.before != fr.after or fr.added or fr.removed
                    else f"{label} {fr.after} (unchanged)", "warning" if fr.after > fr.before else ""))
        for mark, frames in (("+", fr.added), ("-", fr.removed)):
            out += [(4, f"{mark} {f.function or 'frame'} ({_where(f.file, f.line)}): {f.reason or '?'}", _MARK_STYLE[mark])
                    for f in frames if f.file or f.reason]
    for label, c in (("regions", m.regions), ("graphs compiled", m.graphs)):
        if c is not None:
            out.append((2, f"{label} {_arrow(c)}", ""))
    cg = m.cudagraphs
    if cg is not None:
        head = "CUDA graphs: " + ("unchanged" if not cg.changes else count(len(cg.changes), "change"))
        out.append((2, head, "warning" if cg.worse else ""))
        out += [(4, ("+ " if t in cg.worse else "- " if t.startswith("skip lost") else "~ ") + t,
                 "finding" if t in cg.worse else "fixed" if t.startswith("skip lost") else "note") for t in cg.changes]
    for label, p, show in (("mutations", m.mutations, lambda x: f"{x[0]} ({x[1]}): {x[2]}"),
                           ("aliases", m.aliases, lambda x: f"output {x[0]} aliases {x[1]}")):
        if p is None:
            continue
        out.append((2, f"{label}: {len(p.added)} added, {len(p.removed)} removed" if p.added or p.removed
                    else f"{label}: unchanged", "warning" if p.added else ""))
        out += [(4, f"+ {show(x)}", "finding") for x in p.added] + [(4, f"- {show(x)}", "fixed") for x in p.removed]
    for label, c in (("saved activations", m.saved_bytes), ("step peak", m.step_peak)):
        if c is not None:
            out.append((2, f"{label} {_arrow(c, _bytes)}{_pct(c)}", "warning" if c.changed and (c.after or 0) > (c.before or 0) else ""))
    regions: dict[int, list[str]] = {}
    for r, g, c in m.nodes:
        regions.setdefault(r, []).append(f"{g} {_n(c.before)} -> {_n(c.after)}")
    out += [(2, f"nodes, region {r}: " + ", ".join(parts), "") for r, parts in regions.items()]
    if m.compile_seconds is not None:
        out.append((2, f"compile time {_arrow(m.compile_seconds, lambda s: '-' if s is None else f'{s:.2f} s')}", ""))
    out += coverage_lines(m)
    return out


def coverage_lines(m) -> list[tuple[int, str, str]]:
    """Capture coverage: calls captured, fallbacks to eager, and the share of torch calls in graphs."""
    parts = []
    if m.calls_captured is not None:
        parts.append(f"calls captured {_arrow(m.calls_captured)}")
    if m.fallbacks_to_eager is not None:
        parts.append(f"fallbacks to eager {_arrow(m.fallbacks_to_eager)}")
    lines = [(2, "coverage: " + "; ".join(parts), "")] if parts else []
    if m.coverage is not None:
        for setting in ("off", "on"):
            b, a = (_setting(m.coverage.get(s), setting) for s in ("before", "after"))
            if b is None and a is None:
                continue
            same = _share(b) == _share(a)
            lines.append((4, f"torch calls in graphs (nested breaks {setting}): "
                          + (f"{_share(a)} (unchanged)" if same else f"{_share(b)} -> {_share(a)}"), ""))
    return lines


def _share(x: dict | None) -> str:
    return "-" if x is None else f"{x['in_graphs']} of {x['torch_calls']} ({x['share']:.0%})"


def _setting(cov, setting: str):
    """The ``nested_graph_breaks`` ``setting`` ("off"/"on") of a document's coverage, with ``torch_calls``."""
    if not isinstance(cov, dict):
        return None
    for s in cov.get("settings") or ():
        if isinstance(s, dict) and bool(s.get("nested_graph_breaks")) == (setting == "on") and isinstance(s.get("share"), (int, float)):
            return {**s, "torch_calls": cov.get("torch_calls")}
    return None


def diff_view(report):
    """The whole text view: both sides, each model's changes, what is only on one side, the verdict line."""
    from rich.console import Group

    lines: list[tuple[int, str, str]] = [(0, f"before: {_side(report.before)}", "header"),
                                         (0, f"after:  {_side(report.after)}", "header")]
    for m in report.models:
        lines.append((0, display_model(m.name), "header"))
        lines += model_lines(m)
    for label, names in (("only before", report.only_before), ("only after", report.only_after)):
        lines += [(0, f"{label}: {display_model(n)}", "note") for n in names]
    if not report.models:
        lines.append((0, "no model in common", "note"))
    passed = report.passed
    style = "verdict.ok" if passed and not report.worse else "verdict.bad" if not passed else "verdict"
    return Group(_Lines(lines), Text(report.summary(), style=style))


def display_model(name: str) -> str:
    """``/repo/m.py:factory -> m.py:factory`` from ``/repo``."""
    if " -> " in name:
        return " -> ".join(display_model(n) for n in name.split(" -> "))
    path, sep, entry = name.rpartition(":")
    if not sep or "/" in entry:
        return display_path(name) or name
    return f"{display_path(path) or path}:{entry}"


# ---------------------------------------------------------------------------------------------- CI formats


def _findings(report) -> list[dict]:
    """Each thing that got worse, as ``{item, failing, file, line, text}``: new breaks at their line, the rest at
    the model's file."""
    failing = set(report.failed)
    out = []
    for m in report.models:
        model_file = m.after_name.rpartition(":")[0] or m.after_name
        for b in (m.breaks.added if m.breaks else ()):
            out.append({"item": "new-breaks", "failing": _listed("new-breaks", failing), "file": b.file, "line": b.line,
                        "title": "new graph break", "text": f"new graph break: {b.reason}" + (f" [{b.code}]" if b.code else "")})
        for item, why in m.worse(report.fail_on or ()).items():
            if item == "new-breaks":
                continue
            for w in why:
                out.append({"item": item, "failing": True, "file": model_file, "line": None, "title": item, "text": w})
        listed = {f.name for f in report.fail_on}
        from graphtool.analysis.diff.compare import FAIL_ON, FailOn

        for item, why in m.worse(tuple(FailOn(n) for n in FAIL_ON if n not in listed and n != "new-breaks")).items():
            out += [{"item": item, "failing": False, "file": model_file, "line": None, "title": item, "text": w} for w in why]
    return out


def _listed(name: str, failing: set) -> bool:
    return any(f.split(":")[0] == name for f in failing)


def format_sarif(report) -> str:
    """SARIF 2.1.0: one result per thing that got worse; an error where ``--fail-on`` lists it, else a warning."""
    from graphtool import __version__

    rules: dict[str, dict] = {}
    results = []
    for f in _findings(report):
        rid = f"diff/{f['item']}"
        rules.setdefault(rid, {"id": rid, "name": "".join(p.title() for p in f["item"].split("-")),
                               "shortDescription": {"text": f"graphtool diff: {f['title']} got worse"}})
        r = {"ruleId": rid, "level": "error" if f["failing"] else "warning", "message": {"text": f["text"]}}
        if f["file"]:
            r["locations"] = [_sarif_location(f["file"], f["line"])]
        results.append(r)
    doc = {"$schema": SARIF_SCHEMA, "version": "2.1.0", "runs": [{
        "tool": {"driver": {"name": "graphtool", "version": __version__, "informationUri": INFO_URI, "rules": list(rules.values())}},
        "results": results}]}
    return json.dumps(doc, indent=2) + "\n"


def format_github(report) -> str:
    """GitHub Actions workflow commands: ``::error`` for what ``--fail-on`` lists, ``::warning`` for the rest."""
    lines = []
    for f in _findings(report):
        props = ""
        if f["file"]:
            props = f"file={_gh_prop(display_path(f['file']) or f['file'])}," + (f"line={f['line']}," if f["line"] else "")
        lines.append(f"::{'error' if f['failing'] else 'warning'} {props}title={_gh_prop('graphtool diff: ' + f['title'])}::{_gh_data(f['text'])}")
    lines.append(f"::notice title=graphtool diff::{_gh_data(report.summary())}")
    return "\n".join(lines) + "\n"


def format_junit(report) -> str:
    """One testcase per ``--fail-on`` item (per model): a failure when it got worse."""
    cases = []
    for m in report.models:
        worse = m.worse(report.fail_on)
        for f in report.fail_on:
            why = worse.get(str(f), [])
            name = quoteattr(f"{display_model(m.name)}: {f}")
            body = f'      <failure message={quoteattr("; ".join(why))} type="worse">{xml_escape(chr(10).join(why))}</failure>\n' if why else ""
            cases.append(f'    <testcase classname="graphtool.diff" name={name} time="0">\n{body}    </testcase>')
    failures = sum("<failure" in c for c in cases)
    head = f'name="graphtool diff" tests="{len(cases)}" failures="{failures}" errors="0"'
    return ('<?xml version="1.0" encoding="UTF-8"?>\n'
            f'<testsuites {head} time="0">\n  <testsuite {head} skipped="0" time="0">\n'
            + "".join(c + "\n" for c in cases) + "  </testsuite>\n</testsuites>\n")


# ---------------------------------------------------------------------------------------------- the page


def format_html(report) -> str:
    """One self-contained page: each side's versions, and for each model a table with both sides, then the breaks
    added, removed and moved."""
    from graphtool.render.report import _section, _table, format_view

    sides = _table(["", "before", "after"], [
        ["file", escape(report.before.name), escape(report.after.name)],
        ["command", escape(report.before.kind), escape(report.after.kind)],
        ["graphtool", escape(str(report.before.graphtool_version)), escape(str(report.after.graphtool_version))],
        ["torch", escape(str(report.before.torch_version)), escape(str(report.after.torch_version))],
    ])
    sections = [_section("sides", "Both sides", sides)]
    for i, m in enumerate(report.models):
        sections.append(_section(f"model-{i}", display_model(m.name), _model_html(m)))
    text = "\n".join(" " * ind + t for ind, t, _ in [ln for m in report.models for ln in model_lines(m)])
    return format_view(sections, title="diff", summary=report.summary(), text=text)


def _model_html(m) -> str:
    from graphtool.render.report import _table

    rows = []

    def row(label, before, after):
        tag = "span" if before == after else "strong"  # what changed stands out
        rows.append([escape(label), f"<{tag}>{escape(before)}</{tag}>", f"<{tag}>{escape(after)}</{tag}>"])

    if m.breaks is not None:
        row("graph breaks", str(m.breaks.before), str(m.breaks.after))
    for label, fr in (("recompiles", m.recompiles), ("frames run eagerly", m.skipped_frames)):
        if fr is not None:
            row(label, str(fr.before), str(fr.after))
    for label, c, fmt in (("regions", m.regions, _n), ("graphs compiled", m.graphs, _n), ("saved activations", m.saved_bytes, _bytes),
                          ("step peak", m.step_peak, _bytes), ("calls captured", m.calls_captured, _n),
                          ("fallbacks to eager", m.fallbacks_to_eager, _n)):
        if c is not None:
            row(label, fmt(c.before), fmt(c.after))
    if m.cudagraphs is not None:
        row("CUDA graphs", _verdict(m.cudagraphs.before), _verdict(m.cudagraphs.after))
    for r, g, c in m.nodes:
        row(f"region {r} {g} nodes", _n(c.before), _n(c.after))
    body = _table(["", "before", "after"], rows)
    if m.breaks is not None and (m.breaks.added or m.breaks.removed or m.breaks.moved):
        brows = [["added", "", escape(_where(b.file, b.line)), escape(b.code or ""), escape(b.reason)] for b in m.breaks.added]
        brows += [["removed", escape(_where(b.file, b.line)), "", escape(b.code or ""), escape(b.reason)] for b in m.breaks.removed]
        brows += [["moved", escape(_where(x.before.file, x.before.line)), escape(_where(x.after.file, x.after.line)),
                   escape(x.after.code or ""), escape(x.after.reason)] for x in m.breaks.moved]
        body += "<h3>Graph breaks</h3>" + _table(["", "before", "after", "gb id", "reason"], brows)
    for label, p, names in (("Mutations", m.mutations, ("input", "kind", "mutates")), ("Aliases", m.aliases, ("output", "alias of"))):
        if p is not None and (p.added or p.removed):
            prow = [["added", *(escape(str(x)) for x in item)] for item in p.added]
            prow += [["removed", *(escape(str(x)) for x in item)] for item in p.removed]
            body += f"<h3>{label}</h3>" + _table(["", *names], prow)
    return body


def _verdict(v) -> str:
    if v is None:
        return "-"
    return (("eligible" if v.eligible else "not eligible" if v.eligible is False else "?")
            + (f", {v.partitions_graphed}/{v.partitions} partitions" if v.partitions is not None else "")
            + (f", {len(v.skips)} skip reasons" if v.skips else ""))
