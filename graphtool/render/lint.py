"""Lint reports as text (rich), JSON, SARIF 2.1.0, JUnit XML and GitHub workflow commands.

``format_*`` functions return strings; nothing here prints.
"""

from __future__ import annotations

from xml.sax import saxutils

from rich.console import Group
from rich.text import Text

from graphtool.display_paths import display_path as _rel
from graphtool.render.documents import XML_ILLEGAL

SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
INFO_URI = "https://pypi.org/project/torch-graphtool/"


def _place(file, line) -> str:
    return f"{_rel(file)}:{line}" if file else "unknown location"


def _where(b) -> str:
    return _place(b.file, b.line)


def _in_library(file, line) -> str:
    """`` (in torch/_dynamo/external_utils.py:67)`` for a finding torch placed in library code."""
    return f" (in {_rel(file)}:{line})" if file else ""


def _library_note(d: dict) -> str:
    return _in_library(d.get("library_file"), d.get("library_line"))


def _skipped_text(s: dict) -> str:
    """``frame forward skipped: <reason> (broke at m.py:11)``, the frame's own place as a library note."""
    broke = f" (broke at {_place(s['break_file'], s.get('break_line'))})" if s.get("break_file") else ""
    return f"frame {s['function']} skipped: {s['reason']}{broke}{_library_note(s)}"


def lint_diagnostics(report) -> list:
    """Every finding of every model as a diagnostic, grouped by model: breaks, recompiles, skipped
    frames, budget failures, baselined breaks now fixed, models that could not be linted."""
    from graphtool.analysis import diagnostics as dg

    out = []
    for m in report.models:
        model = m.target.name
        failing = m.status != "ok"
        if m.error:  # with findings, the example inputs' run went through and the --dynamic one failed
            said = "only the example inputs were linted" if m.graph_count or m.breaks else "could not lint"
            out.append(dg.Diagnostic("GT-L003", f"{said}: {m.error}", m.target.path, model=model, severity="error"))
        if m.no_graph:
            out.append(dg.Diagnostic("GT-L001", m.no_graph_finding, m.target.path, model=model,
                                     severity="error" if m.no_graph_finding in m.failures else "warning"))
        for b in m.breaks:
            tag = " (allowed)" if b.allowed else " (new)" if b.new else " (baselined)" if b.new is False else ""
            severity = "note" if b.allowed or b.new is False else "error" if failing else "warning"
            d = dg.graph_break(b.reason + _in_library(b.library_file, b.library_line), b.file, b.line, code=b.code, hint=b.hint,
                               source_text=b.source_text, model=model, tag=tag, severity=severity, col=b.col, end_col=b.end_col,
                               other_file=b.library_file)
            out.append(d)
        for r in m.recompiles:
            out.append(dg.recompile(r["function"], r.get("file"), r.get("line"), f"{r['reason']}{_library_note(r)}", model=model))
        for sk in m.skipped_frames:
            out.append(dg.skipped_frame(sk.get("function"), sk.get("file"), sk.get("line"), sk["reason"] + _library_note(sk),
                                        break_file=sk.get("break_file"), break_line=sk.get("break_line"), model=model))
        for f in m.failures:
            if f != m.no_graph_finding:  # said above, as the finding it is
                out.append(dg.Diagnostic("GT-L001", f"over budget: {f}", m.target.path, model=model, severity="error"))
        strict_failed = any("(--strict)" in f for f in m.failures)
        for e in m.fixed:
            out.append(dg.Diagnostic(
                "GT-L002", f"fixed since the baseline: {e['reason']}", _baseline_file(report, e), e.get("line"), model=model,
                source=None, severity="error" if strict_failed else "note",
                help="the break is gone: run `graphtool lint --update-baseline` to keep the baseline tight"))
    return out


def _baseline_file(report, entry: dict) -> str | None:
    """A baseline entry's file (relative to the baseline's folder) as a path from the current folder."""
    import os

    f = entry.get("file")
    if not f or f.startswith("<") or os.path.isabs(f) or not report.baseline:
        return f
    return os.path.normpath(os.path.join(os.path.dirname(report.baseline), f))


def lint_view(report, verdict: str | None = None) -> Group:
    """The table, every finding as a diagnostic, and the verdict (``verdict`` replaces it, for --update-baseline)."""
    from graphtool.render.diagnostics import diagnostics_view
    from graphtool.render.tables import Col, FitTable

    rows = []
    covered = any(m.coverage for m in report.models)  # --coverage: the share of torch calls in graphs, beside the breaks
    compiled = any(m.compile_time for m in report.models)  # --max-compile-seconds: the cold compile's seconds
    for m in report.models:
        style = "status.ok" if m.status == "ok" else "status.bad"
        share = (m.coverage or {}).get("share")
        secs = (m.compile_time or {}).get("seconds")
        rows.append((_rel(m.target.name), Text(m.status.replace("_", " "), style=style), str(m.graph_count),
                     str(len(m.counted_breaks)), *((f"{share:.0%}" if share is not None else "-",) if covered else ()),
                     str(len(m.recompiles)), str(len(m.skipped_frames)), f"{m.seconds:.1f}",
                     *((f"{secs:.1f}" if secs is not None else "-",) if compiled else ())))
    cols = [Col("model", ident=True), Col("status"), Col("graphs", justify="right", drop=2), Col("breaks", justify="right"),
            *((Col("coverage", justify="right", drop=5),) if covered else ()),
            Col("recompiles", justify="right", drop=3), Col("skipped", justify="right", drop=4), Col("seconds", justify="right", drop=1),
            *((Col("compile s", justify="right", drop=6),) if compiled else ())]
    parts = [FitTable("graphtool lint", cols, rows)]
    diags = lint_diagnostics(report)
    if diags:
        parts.append(diagnostics_view(diags))
    if verdict is None:
        verdict = "lint " + ("passed" if report.passed else "could not lint every model" if report.errored else "failed")
        if report.passed and report.ungated():  # say what passed: found, but judged by nothing
            verdict += ": " + "; ".join(report.ungated())
        style = "verdict.ok" if report.passed else "verdict.bad"
    else:
        style = "verdict.ok"
    parts.append(Text(verdict, style=style))
    return Group(*parts)


def _fingerprint(b) -> str:
    """The baseline key as text; the library place is added only when there is one, so the
    fingerprints of breaks in the user's own code stay what they were."""
    *key, library = b.key()
    return "|".join(str(k) for k in key) + (f"|{library}" if library else "")


def _rule_id(b) -> str:
    return f"graph-break/{b.code}" if b.code else "graph-break"


def format_sarif(report) -> str:
    """SARIF 2.1.0: one result per graph break (and recompile), with its physical location."""
    import json

    from graphtool import __version__

    rules: dict[str, dict] = {}
    results = []
    for m in report.models:
        for b in m.breaks:
            rid = _rule_id(b)
            rules.setdefault(rid, {
                "id": rid,
                "name": "GraphBreak",
                "shortDescription": {"text": "torch.compile graph break" + (f" ({b.code})" if b.code else "")},
                "helpUri": f"https://meta-pytorch.github.io/compile-graph-break-site/gb/{b.code}.html" if b.code else INFO_URI,
            })
            level = "note" if b.allowed else "error" if (b.new or (m.status == "over_budget" and b.new is None)) else "warning"
            lib = _in_library(b.library_file, b.library_line)
            result = {
                "ruleId": rid,
                "level": level,
                "message": {"text": f"Graph break: {b.reason}{lib}. Hint: {b.help}"},
                "partialFingerprints": {"graphtoolBreak/v1": _fingerprint(b)},
            }
            if b.file:
                result["locations"] = [_sarif_location(b.file, b.line)]
            if b.new is not None:
                result["baselineState"] = "new" if b.new else "unchanged"
            results.append(result)
        for r in m.recompiles:
            rules.setdefault("recompile", {"id": "recompile", "name": "Recompile", "shortDescription": {"text": "torch.compile recompiled a frame"}})
            results.append({
                "ruleId": "recompile",
                "level": "warning",
                "message": {"text": f"Recompile of {r['function']}: {r['reason']}{_library_note(r)}"},
                "locations": [_sarif_location(r["file"], r["line"])],
            })
        for s in m.skipped_frames:
            rules.setdefault("skipped-frame", {"id": "skipped-frame", "name": "SkippedFrame",
                                               "shortDescription": {"text": "torch.compile gave up on a frame and ran it eagerly"}})
            results.append({
                "ruleId": "skipped-frame",
                "level": "warning",
                "message": {"text": "F" + _skipped_text(s)[1:]},  # "Frame forward skipped: ..."
                "locations": [_sarif_location(s["file"], s["line"])],
            })
        if m.no_graph:
            rules.setdefault("no-graph", {"id": "no-graph", "name": "NoGraph",
                                          "shortDescription": {"text": "torch.compile captured no graph: the model ran eagerly"}})
            results.append({
                "ruleId": "no-graph",
                "level": "error" if m.no_graph_finding in m.failures else "warning",
                "message": {"text": f"{m.target.name}: {m.no_graph_finding}"},
                "locations": [_sarif_location(m.target.path, None)],
            })
        if m.compile_time:
            rules.setdefault("compile-time", {"id": "compile-time", "name": "CompileTime", "shortDescription": {
                "text": "the model's cold torch.compile against max_compile_seconds (graphtool compile)"}})
            results.append({
                "ruleId": "compile-time",
                "level": "note" if m.compile_time["ok"] else "error",
                "message": {"text": f"{m.target.name}: {m.compile_time['text']}"},
                "locations": [_sarif_location(m.target.path, None)],
            })
        if m.error:
            rules.setdefault("lint-error", {"id": "lint-error", "name": "LintError", "shortDescription": {"text": "graphtool could not lint this model"}})
            results.append({
                "ruleId": "lint-error",
                "level": "error",
                "message": {"text": f"Could not lint {m.target.name}: {m.error}"},
                "locations": [{"physicalLocation": {"artifactLocation": {"uri": _rel(m.target.path)}}}],
            })
    doc = {
        "$schema": SARIF_SCHEMA,
        "version": "2.1.0",
        "runs": [{
            "tool": {"driver": {"name": "graphtool", "version": __version__, "informationUri": INFO_URI, "rules": list(rules.values())}},
            "results": results,
        }],
    }
    return json.dumps(doc, indent=2) + "\n"


def _sarif_location(file, line) -> dict:
    region = {"region": {"startLine": line}} if line else {}
    return {"physicalLocation": {"artifactLocation": {"uri": _rel(file)}, **region}}


def _xml_safe(text: str) -> str:
    """``text`` with every character XML cannot carry written as a visible ``\\x1b`` escape."""
    return XML_ILLEGAL.sub(lambda m: f"\\x{ord(m.group()):02x}" if ord(m.group()) < 0x100 else f"\\u{ord(m.group()):04x}", text)


def escape(text: str) -> str:
    """Element text for JUnit XML: escaped, and well-formed whatever the message held."""
    return saxutils.escape(_xml_safe(text))


def quoteattr(text: str) -> str:
    return saxutils.quoteattr(_xml_safe(text))


def format_junit(report) -> str:
    """One testcase per model: a failure when over budget, an error when it could not be linted."""
    failures = sum(m.status == "over_budget" for m in report.models)
    errors = sum(m.status == "error" for m in report.models)
    total = sum(m.seconds for m in report.models)
    out = ['<?xml version="1.0" encoding="UTF-8"?>']
    out.append(f'<testsuites name="graphtool lint" tests="{len(report.models)}" failures="{failures}" errors="{errors}" time="{total:.3f}">')
    out.append(f'  <testsuite name="graphtool lint" tests="{len(report.models)}" failures="{failures}" errors="{errors}" skipped="0" time="{total:.3f}">')
    for m in report.models:
        name = quoteattr(_rel(m.target.name) or m.target.name)
        out.append(f'    <testcase classname="graphtool.lint" name={name} time="{m.seconds:.3f}">')
        details = "\n".join(
            ([m.no_graph_finding] if m.no_graph else [])
            + [f"{_where(b)}: {b.reason}" for b in m.counted_breaks]
            + [f"{_place(s['file'], s['line'])}: {_skipped_text(s)}" for s in m.skipped_frames]
            + ([m.compile_time["text"]] if m.compile_time else [])
        )
        if m.status == "over_budget":
            out.append(f'      <failure message={quoteattr("; ".join(m.failures))} type="over_budget">{escape(details)}</failure>')
        elif m.status == "error":
            out.append(f'      <error message={quoteattr(m.error or "")} type="lint_error">{escape(m.error_detail or "")}</error>')
        if details and m.status == "ok":
            out.append(f"      <system-out>{escape(details)}</system-out>")
        out.append("    </testcase>")
    out.append("  </testsuite>")
    out.append("</testsuites>")
    return "\n".join(out) + "\n"


def _gh_data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _gh_prop(text: str) -> str:
    return _gh_data(text).replace(":", "%3A").replace(",", "%2C")


def format_github(report) -> str:
    """GitHub Actions workflow commands (``::error file=F,line=L::message``) that annotate PRs."""
    lines = []
    for m in report.models:
        failing = m.status != "ok"
        for b in m.breaks:
            if b.allowed:
                continue
            level = "error" if (b.new or (failing and b.new is None)) else "warning"
            props = f"file={_gh_prop(_rel(b.file))},line={b.line}," if b.file and b.line else ""
            lib = _in_library(b.library_file, b.library_line)
            lines.append(f"::{level} {props}title={_gh_prop('graph break')}::{_gh_data(b.reason + lib)}")
        for r in m.recompiles:
            lines.append(f"::warning file={_gh_prop(_rel(r['file']))},line={r['line']},title=recompile::{_gh_data(str(r['reason']) + _library_note(r))}")
        for s in m.skipped_frames:
            props = f"file={_gh_prop(_rel(s['file']))},line={s['line']}," if s.get("file") and s.get("line") else ""
            lines.append(f"::warning {props}title={_gh_prop('skipped frame')}::{_gh_data(_skipped_text(s))}")
        if m.no_graph and m.no_graph_finding not in m.failures:  # a failure is annotated below as an error
            lines.append(f"::warning file={_gh_prop(_rel(m.target.path))},title={_gh_prop('no graph')}::{_gh_data(m.no_graph_finding)}")
        if m.error:
            lines.append(f"::error file={_gh_prop(_rel(m.target.path))},title={_gh_prop('graphtool lint')}::{_gh_data('could not lint: ' + m.error)}")
        for f in m.failures:
            lines.append(f"::error file={_gh_prop(_rel(m.target.path))},title={_gh_prop('over budget')}::{_gh_data(f)}")
    from graphtool.text import count

    lines.append(f"::notice title=graphtool lint::{'passed' if report.passed else 'failed'} ({count(len(report.models), 'model')})")
    return "\n".join(lines) + "\n"
