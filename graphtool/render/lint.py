"""Lint reports as text (rich), JSON, SARIF 2.1.0, JUnit XML and GitHub workflow commands.

``format_*`` functions return strings; nothing here prints.
"""

from __future__ import annotations

from xml.sax.saxutils import escape, quoteattr

from rich.console import Group
from rich.table import Table
from rich.text import Text

from graphtool.display_paths import display_path as _rel
from graphtool.render.tables import row

SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
INFO_URI = "https://pypi.org/project/torch-graphtool/"


def _where(b) -> str:
    return f"{_rel(b.file)}:{b.line}" if b.file else "unknown location"


def lint_view(report) -> Group:
    parts = []
    table = Table(title="graphtool lint", title_justify="left")
    table.add_column("model", overflow="fold", ratio=3)
    for col in ("status", "graphs", "breaks", "recompiles", "skipped", "seconds"):
        table.add_column(col, justify="left" if col == "status" else "right", no_wrap=True)
    for m in report.models:
        style = "status.ok" if m.status == "ok" else "status.bad"
        row(table,
            _rel(m.target.name), Text(m.status.replace("_", " "), style=style), str(m.graph_count),
            str(len(m.counted_breaks)), str(len(m.recompiles)), str(len(m.skipped_frames)), f"{m.seconds:.1f}",
        )
    parts.append(table)
    for m in report.models:
        if m.error:
            parts.append(Text(f"{_rel(m.target.name)}: could not lint: {m.error}", style="finding"))
        for b in m.breaks:
            tag = " (allowed)" if b.allowed else " (new)" if b.new else ""
            parts.append(Text(f"  {_where(b)}: graph break{tag}: {b.reason}"))
        for r in m.recompiles:
            parts.append(Text(f"  {_rel(r['file'])}:{r['line']}: recompile of {r['function']}: {r['reason']}"))
        for s in m.skipped_frames:
            parts.append(Text(f"  {_rel(s['file'])}:{s['line']}: frame {s['function']} skipped: {s['reason']}"))
        for f in m.failures:
            parts.append(Text(f"  {_rel(m.target.name)}: over budget: {f}", style="finding"))
        for e in m.fixed:
            parts.append(Text(f"  fixed since the baseline: {e['file']}:{e.get('line')}: {e['reason']}", style="fixed"))
    verdict = "passed" if report.passed else "could not lint every model" if report.errored else "failed"
    parts.append(Text(f"lint {verdict}", style="verdict.ok" if report.passed else "verdict.bad"))
    return Group(*parts)


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
            result = {
                "ruleId": rid,
                "level": level,
                "message": {"text": f"Graph break: {b.reason}" + (f". Hint: {b.hint}" if b.hint else "")},
                "partialFingerprints": {"graphtoolBreak/v1": "|".join(str(k) for k in b.key())},
            }
            if b.file:
                region = {"startLine": b.line} if b.line else {}
                result["locations"] = [{"physicalLocation": {"artifactLocation": {"uri": _rel(b.file)}, **({"region": region} if region else {})}}]
            if b.new is not None:
                result["baselineState"] = "new" if b.new else "unchanged"
            results.append(result)
        for r in m.recompiles:
            rules.setdefault("recompile", {"id": "recompile", "name": "Recompile", "shortDescription": {"text": "torch.compile recompiled a frame"}})
            results.append({
                "ruleId": "recompile",
                "level": "warning",
                "message": {"text": f"Recompile of {r['function']}: {r['reason']}"},
                "locations": [{"physicalLocation": {"artifactLocation": {"uri": _rel(r["file"])}, "region": {"startLine": r["line"]}}}],
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
        details = "\n".join(f"{_where(b)}: {b.reason}" for b in m.counted_breaks)
        if m.status == "over_budget":
            out.append(f'      <failure message={quoteattr("; ".join(m.failures))} type="over_budget">{escape(details)}</failure>')
        elif m.status == "error":
            out.append(f'      <error message={quoteattr(m.error or "")} type="lint_error">{escape(m.error_detail or "")}</error>')
        if m.breaks and m.status == "ok":
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
            lines.append(f"::{level} {props}title={_gh_prop('graph break')}::{_gh_data(b.reason)}")
        for r in m.recompiles:
            lines.append(f"::warning file={_gh_prop(_rel(r['file']))},line={r['line']},title=recompile::{_gh_data(str(r['reason']))}")
        if m.error:
            lines.append(f"::error file={_gh_prop(_rel(m.target.path))},title={_gh_prop('graphtool lint')}::{_gh_data('could not lint: ' + m.error)}")
        for f in m.failures:
            lines.append(f"::error file={_gh_prop(_rel(m.target.path))},title={_gh_prop('over budget')}::{_gh_data(f)}")
    lines.append(f"::notice title=graphtool lint::{'passed' if report.passed else 'failed'} ({len(report.models)} model(s))")
    return "\n".join(lines) + "\n"
