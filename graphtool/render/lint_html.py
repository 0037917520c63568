"""``graphtool lint --format html``: the lint report as one self-contained HTML page (a CI artifact).

Every model gets a row and its findings; every graph break, recompile and skipped frame is a
diagnostic in the ``path:line: code message`` form with the source line and ``help:``, as the
terminal shows them. Nothing is fetched when the page is opened.

Example::

    >>> from graphtool.analysis.lint import LintReport
    >>> page = format_html(LintReport(models=(), baseline=None))
    >>> "<h1>graphtool lint: passed</h1>" in page
    True
"""

from __future__ import annotations

from html import escape

from graphtool.display_paths import display_path


def _place(file, line) -> str:
    return f"{display_path(file) or file}:{line}" if file and line else (display_path(file) or file or "unknown location")


def _diagnostic(where: str, code: str, message: str, source: str | None, help_text: str | None, severity: str,
                tag: str = "") -> str:
    src = f'<pre class="snippet"><span class="hit">{escape(source)}</span></pre>' if source else ""
    fix = f'<div class="fix"><b>help:</b> {escape(help_text)}</div>' if help_text else ""
    tag_html = f' <span class="count">{escape(tag)}</span>' if tag else ""
    return (f'<li class="finding sev-{severity}"><div class="head"><span class="where">{escape(where)}</span>: '
            f'<b>{escape(code)}</b>{tag_html}</div><div class="msg">{escape(message)}</div>{src}{fix}</li>')


def _model(m) -> str:
    items = []
    if m.error:
        said = "only the example inputs were linted" if m.graph_count or m.breaks else "could not lint"  # see lint_diagnostics
        items.append(_diagnostic(m.target.name, "error", f"{said}: {m.error}", None, m.error_detail, "error"))
    if m.no_graph:
        items.append(_diagnostic(m.target.name, "no-graph", m.no_graph_finding or m.no_graph, None, None, "error"))
    for b in m.breaks:
        tag = "allowed" if b.allowed else "new" if b.new else "in baseline" if b.new is False else ""
        lib = f" (in {_place(b.library_file, b.library_line)})" if b.library_file else ""
        sev = "info" if b.allowed else "error" if b.new or m.status == "over_budget" else "warning"
        items.append(_diagnostic(_place(b.file, b.line), f"graph-break{'/' + b.code if b.code else ''}", b.reason + lib,
                                 b.source_text, b.help, sev, tag))
    for r in m.recompiles:
        items.append(_diagnostic(_place(r.get("file"), r.get("line")), "recompile", f"{r.get('function')}: {r.get('reason')}",
                                 None, None, "warning"))
    for s in m.skipped_frames:
        items.append(_diagnostic(_place(s.get("file"), s.get("line")), "skipped-frame", f"frame {s.get('function')} skipped: {s.get('reason')}",
                                 None, None, "warning"))
    for f in m.failures:
        if f != m.no_graph_finding:
            items.append(_diagnostic(m.target.name, "over-budget", f, None, None, "error"))
    for e in m.fixed:
        items.append(_diagnostic(_place(e.get("file"), e.get("line")), "fixed", f"no longer breaks: {e.get('reason')}", None, None, "info"))
    status = m.status.replace("_", " ")
    body = f'<ol class="findings">{"".join(items)}</ol>' if items else '<p class="ok">no graph break, recompile or skipped frame</p>'
    name = display_path(m.target.name) or m.target.name
    return (f'<section class="model status-{m.status}"><h2>{escape(name)} <span class="count">{escape(status)}</span></h2>'
            f"{body}</section>")


def format_html(report) -> str:
    """The whole page for a :class:`~graphtool.analysis.lint.LintReport`."""
    from graphtool import __version__
    from graphtool.render.report import stylesheet

    verdict = "passed" if report.passed else "could not lint every model" if report.errored else "failed"
    rows = "".join(
        f"<tr><td>{escape(display_path(m.target.name) or m.target.name)}</td><td class='st-{m.status}'>{escape(m.status.replace('_', ' '))}</td>"
        f"<td>{m.graph_count}</td><td>{len(m.counted_breaks)}</td><td>{len(m.recompiles)}</td><td>{len(m.skipped_frames)}</td>"
        f"<td>{m.seconds:.1f}</td></tr>"
        for m in report.models
    )
    table = ("<table><thead><tr><th>model</th><th>status</th><th>graphs</th><th>breaks</th><th>recompiles</th>"
             f"<th>skipped</th><th>seconds</th></tr></thead><tbody>{rows}</tbody></table>")
    baseline = f'<p class="note">baseline: {escape(report.baseline)}</p>' if report.baseline else ""
    models = "\n".join(_model(m) for m in report.models)
    cls = "ok" if report.passed else "bad"
    n, breaks = len(report.models), sum(len(m.counted_breaks) for m in report.models)
    summary = f"{n} model{'s' if n != 1 else ''}, {breaks} graph break{'s' if breaks != 1 else ''} counted; graphtool {__version__}"
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>graphtool lint: {escape(verdict)}</title>
<style>{stylesheet()}
.st-ok {{ color: var(--ok); }} .st-over_budget, .st-error {{ color: var(--bad); font-weight: 600; }}</style></head>
<body><header><h1>graphtool lint: {escape(verdict)}</h1>
<p class="summary verdict {cls}">{escape(summary)}</p></header>
<main><section>{table}{baseline}</section>
{models}
</main></body></html>
"""
