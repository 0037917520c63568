"""The ``graphtool report`` page: one self-contained HTML file, nothing fetched when it is opened.

The viewer's script and style (``graphtool/render/html/``) are inlined; each picture's SVG, one per
fold level, is gzip-compressed and base64-encoded into the page's data and unpacked by the browser
only when shown, so a large model's page stays small and only one level is ever in the DOM; each
graph's node facts and fold membership are packed the same way and unpacked when the page opens.
Everything else (findings, mutations, devices, CUDA graphs, memory) is plain HTML written here.

Example::

    >>> page = format_page({"title": "m.py", "summary": "1 compiled region", "sections": [], "pictures": [], "svgs": []})
    >>> page.startswith("<!DOCTYPE html>") and "http" not in page.split("<script")[0].lower()
    True
"""

from __future__ import annotations

import base64
import gzip
import json
import re
import shutil
import sys
import tempfile
from html import escape
from importlib import resources
from pathlib import Path

from graphtool.display_paths import display_path

_XML_PROLOGUE = re.compile(r"<\?xml[^>]*\?>\s*|<!DOCTYPE[^>]*>\s*|<!--.*?-->\s*", re.S)


def layout_svg(dot_text: str, timeout: float | None = None) -> str:
    """Lay out DOT text as SVG (Graphviz's ``dot`` or graphviz-pure), returned as text without its
    XML prologue and comments, ready to sit inside an HTML page."""
    from graphtool.render.layout import render_file

    folder = tempfile.mkdtemp(prefix="graphtool-report-")
    try:
        out = Path(folder) / "picture.svg"
        render_file(dot_text, "svg", out, timeout=timeout)
        return _XML_PROLOGUE.sub("", out.read_text(encoding="utf-8"))
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _packed(svg: str) -> str:
    return base64.b64encode(gzip.compress(svg.encode("utf-8"), compresslevel=9, mtime=0)).decode("ascii")


def _asset(name: str) -> str:
    return resources.files("graphtool.render").joinpath("html", name).read_text(encoding="utf-8")


def stylesheet() -> str:
    """The report's CSS, which the lint page shares."""
    return _asset("viewer.css")


def _json_for_script(data) -> str:
    # inside <script>, "</" would end the element early
    return json.dumps(data, separators=(",", ":"), default=str).replace("</", "<\\/")


def format_page(page: dict) -> str:
    """The whole HTML document for a page model (``title``, ``summary``, ``sections``: HTML strings,
    ``pictures`` and ``svgs``: the viewer's data)."""
    data = {"pictures": page["pictures"], "svgs": page["svgs"]}
    sections = "\n".join(page["sections"])
    notes = "".join(f'<p class="note">{escape(n)}</p>' for n in page.get("notes", ()))
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>graphtool report: {escape(page['title'])}</title>
<style>{_asset('viewer.css')}</style></head>
<body>
<header><h1>graphtool report: <span class="model">{escape(page['title'])}</span></h1>
<p class="summary" id="summary">{escape(page['summary'])}</p>
<p class="subtitle">{escape(page.get('subtitle', ''))}</p>{notes}</header>
<main>
{sections}
</main>
<script type="application/json" id="graphtool-data">{_json_for_script(data)}</script>
<script>{_asset('viewer.js')}</script>
</body></html>
"""


# -- the report's sections ---------------------------------------------------------------------


def format_report(sections: list[str], pictures, *, title: str, summary: str, subtitle: str, notes=()) -> str:
    """The ``graphtool report`` page: its ``sections`` in order, and ``pictures`` (each a graph laid out at every
    fold level, with what a click on a node shows) packed for the viewer."""
    packed, svgs = [], []
    for p in pictures:
        levels = []
        for lv in p.levels:
            levels.append({"name": lv.name, "depth": lv.depth, "boxes": lv.boxes, "svg": len(svgs)})
            svgs.append(_packed(lv.svg))
        # facts and fold membership are most of a large graph's bytes: packed like the pictures
        facts = {"facts": _short_paths(p.facts), "members": [lv.members for lv in p.levels]}
        packed.append({"id": f"r{p.region}-{p.graph}", "region": p.region, "graph": p.graph, "nodes": p.nodes,
                       "drawn": p.drawn, "edges": p.edges, "default": p.default, "levels": levels, "packed": len(svgs)})
        svgs.append(_packed(json.dumps(facts, separators=(",", ":"), default=str)))
    return format_page({"title": title, "summary": summary, "sections": [s for s in sections if s],
                        "pictures": packed, "svgs": svgs, "subtitle": subtitle, "notes": list(notes)})


def against_section(comparison, title: str = "Beside graphtool's prediction", extra: str = "") -> str:
    """A real run's facts beside graphtool's prediction (``graphtool log --against``, ``report --log``)."""
    rows = [[escape(str(c)) for c in (r.fact, r.what, r.predicted, r.seen, "agrees" if r.agree else "differs", r.cause or "")]
            for r in comparison.rows]
    return _section("against", title, extra + _table(["fact", "what", "graphtool", "the run", "", "likely cause"], rows),
                    comparison.disagreements)


def beside_run_section(beside) -> str:
    """``report --log``'s section: the run's logs (``RunLog``) beside this page's prediction (``Comparison``)."""
    facts, comparison = beside
    files = ", ".join(display_path(f.path) or f.path for f in facts.log.files)
    extra = (f'<p class="subtitle">The run: {escape(files)}; {escape(facts.summary())}.</p>'
             + "".join(f'<p class="note">desync: {escape(d.message)}</p>' for d in facts.desync))
    return against_section(comparison, "Beside a real run (graphtool log)", extra)


def _short_paths(facts: dict) -> dict:
    out = {}
    for nid, f in facts.items():
        src = f.get("source")
        out[nid] = {**f, "source": _place(src)} if src else f
    return out


def _place(source: str | None) -> str:
    if not source:
        return ""
    file, _, line = source.rpartition(":")
    return f"{display_path(file) or file}:{line}" if file and line.isdigit() else source


def _section(sid: str, title: str, body: str, count: int | None = None) -> str:
    badge = f' <span class="count">{count}</span>' if count is not None else ""
    return f'<section id="{sid}"><h2>{escape(title)}{badge}</h2>\n{body}\n</section>'


def _table(head: list[str], rows: list[list[str]], cls: str = "") -> str:
    """``rows`` hold HTML already escaped."""
    th = "".join(f"<th>{escape(h)}</th>" for h in head)
    body = "".join("<tr>" + "".join(f"<td>{c}</td>" for c in r) + "</tr>" for r in rows)
    return f'<table class="{cls}"><thead><tr>{th}</tr></thead><tbody>{body}</tbody></table>'


def model_section(t, stand_in: str, command: str, versions: dict) -> str:
    """About this report: the model, how it was traced, the command that makes the page again, the versions."""
    rows = [
        ["model", escape(display_path(t.path) or t.path)],
        ["entry", escape(str(t.entry))],
        ["device", escape(t.device)],
        ["mode", "training (forward + backward)" if t.training else "inference (forward only)"],
        ["backend", escape(t.backend)],
        ["pictures traced on", escape("meta, standing for a GPU" if stand_in == "meta" else stand_in)],
        ["command", f"<code>{escape(command)}</code>"],
        ["versions", escape(", ".join(f"{k} {v}" for k, v in versions.items()))],
    ]
    return _section("model", "About this report", _table(["", ""], rows, "facts"))


def _snippet(f: dict) -> str:
    if not f.get("snippet"):
        return ""
    lines = []
    for n, text in f["snippet"]:
        mark = ' class="hit"' if n == f.get("line") else ""
        lines.append(f'<span{mark}><span class="ln">{n}</span>{escape(text)}</span>')
    return '<pre class="snippet">' + "".join(lines) + "</pre>"


def _see(url: str | None) -> str:
    """torch's page for a graph break, as the CLI diagnostics' ``= see:`` line gives it."""
    if not url:
        return ""
    return f'<div class="see"><b>see:</b> <a href="{escape(url)}" target="_blank" rel="noopener">{escape(url)}</a></div>'


def findings_section(findings) -> str:
    if not findings:
        return _section("findings", "Findings", '<p class="ok">Nothing found: no graph break, mutation, device copy or CUDA-graph skip.</p>', 0)
    items = []
    for i, finding in enumerate(findings):
        f = finding.to_dict()
        node = f["node"]
        attrs = f' data-region="{node["region"]}" data-graph="{node["graph"]}" data-node="{escape(node["node"])}"' if node else ""
        where = f'<span class="where">{escape(_place(f["source"]))}</span>: ' if f["source"] else ""
        link = (f'<button class="goto" type="button">show node {escape(node["node"])} in region {node["region"]} {node["graph"]}</button>'
                if node else "")
        fix = f'<div class="fix"><b>help:</b> {escape(f["fix"])}</div>' if f["fix"] else ""
        fix += _see(f["url"])
        items.append(
            f'<li class="finding sev-{f["severity"]}" id="finding-{i}"{attrs}>'
            f'<div class="head">{where}<b>{escape(f["title"])}</b></div>'
            f'<div class="msg">{escape(f["message"])}</div>{_snippet(f)}{fix}{link}</li>'
        )
    return _section("findings", "Findings", f'<ol class="findings">{"".join(items)}</ol>', len(findings))


def graphs_section(pictures, trace, devices, stand_in: str) -> str:
    """The pictures' tabs and viewer; each tab counts the graph it draws (the stand-in's, as Devices counts it)."""
    if not pictures:
        return _section("graphs", "Graphs", '<p class="note">torch.compile captured no graph to draw.</p>')
    # a tab counts the graph it draws, the stand-in's, as the Devices table does; the Compiled regions
    # table counts the own-device graph (graphtool trace's), and both tables say which is which
    where = escape(devices.shown_device if devices is not None else stand_in)
    own = _own_counts(trace)
    tabs = "".join(
        f'<button type="button" class="tab{" active" if i == 0 else ""}" data-picture="{i}" title="{p.nodes} graph nodes as traced for {where}, counted '
        f'as the Devices table counts them{_own_differs(own, p.region, p.graph, p.nodes, trace.device)}; the picture '
        f'draws {p.drawn} (output markers in place of the output node)">region {p.region} {p.graph} '
        f'<small>{p.nodes} nodes</small></button>'
        for i, p in enumerate(pictures)
    )
    return _section("graphs", "Graphs", viewer(tabs, _first_paint(pictures[0])))


def viewer(tabs: str, first: str) -> str:
    """The picture viewer's markup under its tabs (``<button class="tab" data-picture="I">``, HTML already escaped)
    with ``first`` painted in its canvas (:func:`_first_paint`): the report page's, and ``graphtool log``'s page."""
    return f"""<div class="tabs" id="picture-tabs">{tabs}</div>
<div class="viewer" id="viewer">
  <div class="toolbar">
    <label>fold <select id="level"></select></label>
    <button type="button" id="fold" title="fold one level (fewer, larger boxes)">fold</button>
    <button type="button" id="unfold" title="unfold one level">unfold</button>
    <button type="button" id="fit" title="fit the picture in the window">fit</button>
    <button type="button" id="zoom-in" title="zoom in">+</button><button type="button" id="zoom-out" title="zoom out">&minus;</button>
    <input id="search" type="search" placeholder="search a node, op or parameter (e.g. fc1.weight)" autocomplete="off">
    <span id="search-status"></span>
  </div>
  <div class="panes">
    <div class="canvas" id="canvas" tabindex="0">{first}</div>
    <aside class="details" id="details"><p class="hint">Click a node to see its op, shape, saved tensors and source line.
    Click a module box to unfold it. Drag to pan, wheel to zoom.</p></aside>
  </div>
  <ul class="results" id="search-results"></ul>
</div>"""


#: the first picture is inlined as laid out, uncompressed, up to this size; a larger one shows a smaller fold level
FIRST_PAINT_LIMIT = 1_500_000
_SVG_SIZE = re.compile(r'\s(?:width|height)="[^"]*"')


def _first_paint(picture) -> str:
    """The first picture, as the viewer opens it, in the page itself: a screenshot, a print or a browser without
    scripts shows the graph at once, not ``loading...`` until the viewer has unpacked it (it then replaces it).
    Sized to the pane by its viewBox; a level over :data:`FIRST_PAINT_LIMIT` gives way to a more folded one."""
    order = [picture.default, *range(picture.default - 1, -1, -1)]
    level = next((picture.levels[i] for i in order if len(picture.levels[i].svg) <= FIRST_PAINT_LIMIT), None)
    if level is None or "<svg" not in level.svg:
        return '<div class="loading">loading...</div>'
    start = level.svg.index("<svg")
    end = level.svg.index(">", start)
    tag = _SVG_SIZE.sub("", level.svg[start:end])  # the root's own size: the pane sizes it, as the viewer does
    return level.svg[:start] + tag + ' class="first-paint"' + level.svg[end:]


def _src_cell(source) -> str:
    return f'<span class="where">{escape(_place(str(source)))}</span>' if source else ""


def _mutations_section(m) -> str:
    def rows(inputs):
        out = []
        for x in inputs:
            how = ", ".join(k for k, on in (("data", x.mutates_data), ("metadata", x.mutates_metadata), ("storage", x.mutates_storage)) if on)
            # the regions whose graph writes it: a parameter is an input of the forward and the optimizer, written by the optimizer only
            out.append([escape(x.name), escape(x.kind), escape(how + (" (no_grad)" if x.under_no_grad else "")), _src_cell(x.source),
                        escape(", ".join(map(str, x.mutated_in or x.regions)))])
        return out

    head = ["input", "kind", "mutated", "where", "written in region"]
    body = f'<p class="verdict">{escape(m.verdict())}</p>'
    others = [x for x in m.mutated if not x.by_optimizer]
    if others:
        body += _table(head, rows(others))
    if m.optimizer_writes:  # a whole step's every parameter and state tensor: folded, one click away
        body += (f'<details class="optimizer-writes"><summary>{escape(m.optimizer_summary() or "")}: '
                 f"{len(m.optimizer_writes)} tensors</summary>{_table(head, rows(m.optimizer_writes))}</details>")
    from graphtool.analysis.findings import alias_target

    alias = [[str(o.index), "view" if o.is_view else "shares storage", escape(alias_target(o.alias_of))] for o in m.aliased_outputs]
    alias += [[escape(" and ".join(a.names)), escape(a.relation.replace("_", " ")), "inputs"] for a in m.input_aliases]
    if alias:
        body += "<h3>Aliasing</h3>" + _table(["output / inputs", "how", "of"], alias)
    return _section("mutations", "Mutations and aliasing", body)


def _devices_section(d) -> str:
    if d is None:
        return ""
    body = f'<p class="verdict">{escape(d.verdict())}</p>'
    # as ``graphtool devices`` prints them: the stand-in's meta read as the device it stands for
    rows = [[f"region {g.region} {g.graph}", "" if g.nodes is None else str(g.nodes), escape(", ".join(d.shown_counts(g))),
             str(len(g.off_device)), str(len(g.copies))] for g in d.graphs]
    if rows:
        body += _table(["graph", _standin_nodes_head(d), "nodes per device", "off the device", "copies"], rows)
        if d.stand_in:
            body += (f'<p class="note">These graphs are traced for {escape(d.shown_device)}: their node counts can differ '
                     'from the Compiled regions table, which counts the graphs traced on the model\'s own device '
                     '(as graphtool trace does).</p>')
    return _section("devices", "Devices", body)


def _cudagraphs_section(v) -> str:
    if v is None:
        return ""
    cls = "ok" if v.eligible else "bad"
    body = f'<p class="verdict {cls}">{escape(v.summary())}</p>'
    if v.predicted:
        body += '<p class="note">Predicted from a trace on the meta device standing for a GPU, with torch\'s own checks.</p>'
    rows = [[escape(r.code), "skips" if r.skips else "note", escape(f"region {r.region} {r.graph}" if r.region is not None else "between regions"),
             escape(r.message), _src_cell(r.source), escape(r.fix or "")] for r in v.reasons]
    body += _steady_html(getattr(v, "steady", None))
    if rows:
        body += _table(["reason", "effect", "where", "message", "line", "fix"], rows)
    return _section("cudagraphs", "CUDA graphs", body)


def _steady_html(steady) -> str:
    """The loop's steps, as ``graphtool cudagraphs`` prints them: the steady state, each step's counts, each recompile."""
    if steady is None:
        return ""
    good = steady.steady_from is not None and not steady.failed
    body = f'<p class="verdict {"ok" if good else "bad"}">steady state {escape(steady.summary())}</p>'
    body += _table(["step", "graphs compiled", "recompiles", "warm-ups", "recorded", "replayed", "skipped runs"],
                   [[str(f.step), str(f.graphs_compiled), str(len(f.recompiles)), str(f.warmups), str(f.recordings),
                     str(f.replays), str(f.skipped_calls)] for f in steady.per_step], "steps")
    return body + "".join(f'<p class="note">step {r.step}: recompiled {escape(str(r.function))} '
                          f'{_src_cell(f"{r.file}:{r.line}" if r.file else None)}: {escape(r.reason)}</p>'
                          for f in steady.per_step for r in f.recompiles)


def ddp_section(d) -> str:
    """``--ddp``: one row per graph DDP's optimizer split off (a region of the page), its bucket, where
    the split falls and its CUDA-graph verdict; the graph count at other caps, unused parameters, notes."""
    if d is None:
        return ""
    from graphtool.render.distributed import split_verdict_line

    mb = 1024 * 1024
    body = (f'<p class="verdict">{escape(d.wrapper)} on {d.world_size} rank{"s" if d.world_size != 1 else ""}, '
            f'bucket_cap_mb={d.bucket_cap_mb:g}: {d.graph_count} graph{"s" if d.graph_count != 1 else ""} from '
            f'{d.dynamo_graphs} dynamo graph{"s" if d.dynamo_graphs != 1 else ""}</p>')
    rows = [[f"region {g.region}", str(g.dynamo_graph), str(g.bucket), str(len(g.params)),
             escape(f"{g.bytes / mb:.1f} MB"), escape(g.module or ""), _src_cell(g.source),
             escape(split_verdict_line(g.cudagraphs) if g.cudagraphs is not None else "")] for g in d.graphs]
    if rows:
        body += _table(["graph", "dynamo graph", "bucket", "params", "bytes", "module", "split at", "CUDA graphs"], rows)
    if d.graphs_at:
        caps = ", ".join(f"{cap:g} MB: {n}" for cap, n in d.graphs_at)
        body += f'<p class="note">Graphs at other bucket caps: {escape(caps)}.</p>'
    u = d.unused
    if u is not None:
        cls = "bad" if u.get("fails_at_step") else ""
        said = u.get("error") if u.get("fails_at_step") else "find_unused_parameters=True: the loop goes on"
        body += (f'<p class="verdict {cls}">Parameters without gradient: {escape(", ".join(u["parameters"]))}; '
                 f'{escape(said or "")}</p><p class="note">Fix: {escape(u["fix"])}</p>')
    body += "".join(f'<p class="note">{escape(n)}</p>' for n in d.notes)
    return _section("ddp", "DDP", body, d.graph_count)


def fsdp2_section(f, rank_memory=None) -> str:
    """``--fsdp2``: the FSDP units and their shards, each compiled graph (a region of the page) with the
    blocks it serves per step and its CUDA-graph verdict, the breaks, the eager collectives of one step,
    each rank's memory (activations when memory was measured), what is predicted only, the notes."""
    if f is None:
        return ""
    from graphtool.analysis.memory.saved import format_bytes
    from graphtool.render.distributed import split_verdict_line
    from graphtool.text import count

    body = (f'<p class="verdict">{escape(f.wrapper)} on {escape(count(f.world_size, "rank"))}: '
            f'{escape(count(f.graph_count, "compiled graph"))}, {escape(count(len(f.breaks), "graph break"))}</p>')
    body += _table(["FSDP unit", "params", "full", "shard per rank", "all-gathered"],
                   [[escape(u.module or "(root)"), str(u.params), escape(format_bytes(u.full_bytes)),
                     escape(format_bytes(u.shard_bytes)), escape(format_bytes(u.allgather_bytes))] for u in f.units])
    if f.graphs:
        body += _table(["graph", "runs per step", "CUDA graphs"],
                       [[f"region {g.region}", str(g.runs_per_step or ""), escape(split_verdict_line(g.cudagraphs))]
                        for g in f.graphs])
    for b in f.breaks:
        what = "frame skipped" if b.skips_frame else "graph break"
        body += f'<p class="note">{what}: {escape(b.reason)} {_src_cell(b.user_source)}</p>'
    if f.collectives:
        body += _table(["graph", "collective", "group", "bytes"],
                       [[escape(f"region {c.region} {c.graph}"), escape(c.op), escape(c.group or ""),
                         escape(format_bytes(c.bytes) if c.bytes is not None else "")] for c in f.collectives])
    if f.eager:
        body += "<h3>Eager collectives per step, each rank</h3>" + _table(
            ["unit", "collective", "calls", "sends", "receives"],
            [[escape(e.unit or "(root)"), escape(e.op), str(e.count), escape(format_bytes(e.sent_bytes)),
              escape(format_bytes(e.received_bytes))] for e in f.eager])
    rows = rank_memory.per_rank if rank_memory is not None else ()
    head = ["rank", "params", "grads", "optimizer"] + (["activations"] if rows else []) + ["all-gather*", "total"]
    table = []
    for i, m in enumerate(f.memory):
        opt = escape(format_bytes(m.optimizer)) if m.optimizer is not None else "-"
        act = [escape(format_bytes(rows[i].activations_bytes))] if rows else []
        total = rows[i].total_bytes if rows else m.total
        table.append([str(m.rank), escape(format_bytes(m.params)), escape(format_bytes(m.grads)), opt, *act,
                      escape(format_bytes(m.allgather_peak)), escape(format_bytes(total))])
    opt_name = f" (optimizer: {escape(f.optimizer)})" if f.optimizer else ""
    body += f"<h3>Memory per rank{opt_name}</h3>" + _table(head, table)
    for note in (rank_memory.notes if rank_memory is not None else ()):
        body += f'<p class="note">{escape(note)}</p>'
    for fact in f.predicted_only:
        body += f'<p class="note">Predicted only: {escape(fact)}</p>'
    body += "".join(f'<p class="note">{escape(n)}</p>' for n in f.notes)
    return _section("fsdp2", "FSDP2", body, f.graph_count)


def _memory_section(m, note) -> str:
    if m is None:
        return _section("memory", "Memory", f'<p class="note">Memory: {escape(note or "not measured")}</p>')
    from graphtool.analysis.memory.saved import format_bytes

    body = f'<p class="verdict">{escape(m.verdict())}</p>'
    rows = [[k, str(h.tensors), escape(format_bytes(h.bytes))] for k, h in (("parameters", m.parameters), ("gradients", m.gradients), ("buffers", m.buffers))]
    for name, side in (("saved for backward (eager)", m.eager), (f"saved for backward (compiled, {m.backend})", m.compiled)):
        unmeasured = side is m.eager and m.eager_not_measured
        rows.append([escape(name), "-" if unmeasured else str(len(side.tensors)),
                     "not measured" if unmeasured else escape(format_bytes(side.bytes))])
    body += _table(["what", "tensors", "bytes"], rows)
    if m.eager_not_measured:
        body += f'<p class="note">eager: not measured: {escape(m.eager_not_measured)}</p>'
    top = [[_src_cell(g.source) or escape(g.key), escape(format_bytes(g.eager_bytes)), escape(format_bytes(g.compiled_bytes))] for g in m.top_lines]
    if top:
        body += "<h3>Activations by line</h3>" + _table(["line", "eager", "compiled"], top)
    if m.recomputed:
        body += f'<p class="note">{len(m.recomputed)} forward ops are recomputed in the backward instead of saved.</p>'
    return _section("memory", "Memory", body)


def _own_counts(t) -> dict:
    return {(r.index, g.kind): g.nodes for r in t.regions for g in (r.forward, r.backward) if g is not None}


def _own_differs(own: dict, region: int, graph: str, nodes: int, device: str) -> str:
    n = own.get((region, graph))
    return "" if n is None or n == nodes else f"; traced on {device} (Compiled regions, graphtool trace) it has {n}"


def _standin_nodes_head(d) -> str:
    return f"nodes (traced for {d.shown_device})" if d is not None and d.stand_in else "nodes"


def regions_section(t, devices=None) -> str:
    """One row per graph as ``graphtool trace`` counts it (the model's own device); when the graphs traced
    for the predicted GPU (the pictures', the Devices table's) count differently, their count is a
    column of its own, named so."""
    standin = {(g.region, g.graph): g.nodes for g in devices.graphs} if devices is not None and devices.stand_in else {}
    own = _own_counts(t)
    differ = any(k in own and n != own[k] for k, n in standin.items())
    rows = []
    for r in t.regions:
        for g in (r.forward, r.backward):
            if g is None:
                continue
            top = ", ".join(f"{op.replace('aten.', '')} {n}" for op, n in list(g.ops.items())[:6])
            other = [str(standin.get((r.index, g.kind), ""))] if differ else []
            rows.append([f"region {r.index} {g.kind}", str(g.nodes), *other, str(len(g.placeholders)), escape(top)])
    head = ["graph", f"nodes (on {t.device})", *([_standin_nodes_head(devices)] if differ else []), "inputs", "most used ops"]
    body = _table(head, rows) if rows else '<p class="note">no compiled region</p>'
    if differ:
        body += (f'<p class="note">Two counts of one graph: on {escape(t.device)}, as graphtool trace counts it, and as traced '
                 f'for {escape(devices.shown_device)} on the meta stand-in (the pictures and the Devices table), where '
                 "inductor's pattern passes skip nodes on meta: the stand-in's graphs can keep nodes (pairs of views, "
                 'for one) that a compile for the real device removes.</p>')
    body += _coverage_note(t)
    breaks = "".join(f'<li><span class="where">{escape(_place(f"{b.file}:{b.line}" if b.file else None))}</span> {escape(b.reason)}'
                     f'{_see(b.url)}</li>' for b in t.breaks)
    if breaks:
        body += f"<h3>Graph breaks between regions</h3><ul>{breaks}</ul>"
    return _section("regions", "Compiled regions", body)


def _coverage_note(t) -> str:
    """Capture coverage beside the breaks, as torch's counters give it for the traced call (``calls_captured``,
    ``fallbacks_to_eager``), and the share of torch calls in graphs when it was measured (``trace --coverage``).

    >>> from types import SimpleNamespace as NS
    >>> _coverage_note(NS(counters={"calls_captured": 7, "fallbacks_to_eager": 0}, coverage=None))
    '<p class="note">Capture coverage: 7 calls captured, 0 fallbacks to eager (as torch counts them for the traced call)</p>'
    """
    counters = t.counters or {}
    if counters.get("calls_captured") is None and t.coverage is None:
        return ""
    from graphtool.text import count

    text = (f"{count(counters['calls_captured'], 'call')} captured, {count(counters.get('fallbacks_to_eager') or 0, 'fallback')} "
            "to eager (as torch counts them for the traced call)") if counters.get("calls_captured") is not None else ""
    if t.coverage is not None:
        text += ("; " if text else "") + t.coverage.line()
    return f'<p class="note">Capture coverage: {escape(text)}</p>'


def python_version() -> str:
    return ".".join(map(str, sys.version_info[:3]))


# -- one report on its own (a notebook cell) ----------------------------------------------------
# each command's result picks its own sections (``result.sections()``): the page's, not a copy of them


def trace_sections(report) -> list[str]:
    """``graphtool trace``'s part of the page: the Compiled regions table and the mutations."""
    return [regions_section(report), _mutations_section(report.mutations)]


def mutations_section(report) -> str:
    return _mutations_section(report)


def devices_section(report) -> str:
    return _devices_section(report)


def cudagraphs_section(verdict) -> str:
    return _cudagraphs_section(verdict)


def memory_section(report, note: str | None = None) -> str:
    return _memory_section(report, note)


def fit_section(fit) -> str:
    """``memory --fit``/``--budgets``' part of a page: the answer, the phases eager beside compiled, what is held,
    the biggest contributors, the compiled step's live-bytes timeline as a picture, and the budget sweep."""
    from graphtool.analysis.memory.saved import format_bytes
    from graphtool.render.fit import timeline_svg

    def b(n):
        return "-" if n is None else escape(format_bytes(n))

    head = fit.verdict or f"predicted step peak: compiled {format_bytes(fit.compiled.peak)}"
    body = f'<p class="verdict">{escape(head)}</p>'
    body += _table(["step", "forward", "backward", "optimizer", "peak", "peaks in"],
                   [[escape(s.label), b(s.forward), b(s.backward), b(s.optimizer), b(s.peak), escape(s.phase)]
                    for s in (fit.eager, fit.compiled, fit.reduce_overhead) if s is not None])
    if fit.reduce_overhead is not None:
        body += (f'<p class="note">reduce-overhead: each phase includes cudagraph trees\' private pool, '
                 f"{b(fit.reduce_overhead.pool)}, where the gradients and cuBLAS workspaces live</p>")
    h = fit.held
    held = [("parameters", h.parameters), ("gradients", h.gradients), ("buffers", h.buffers), ("inputs", h.inputs),
            ("optimizer state", h.optimizer_state), ("cuBLAS workspaces", h.workspace or None)]
    body += _table(["held", "bytes"], [[escape(k), b(v)] for k, v in held if v is not None])
    if fit.contributors:
        body += "<h3>Biggest contributors</h3>" + _table(
            ["what", "where", "bytes"], [[escape(c.what), _src_cell(c.source), b(c.bytes)] for c in fit.contributors])
    svg = timeline_svg(fit)
    if svg:
        body += ("<h3>Live bytes through the compiled step</h3>" + svg +
                 '<p class="note">After each node of each region\'s forward graph, then each backward graph, then the '
                 "optimizer's step (a whole training step's compiled optimizer graph, node by node), with what the caller "
                 "holds (parameters, inputs, optimizer state, gradients as they are made); every tensor rounded to the "
                 "caching allocator's 512-byte blocks.</p>")
    def sweep(points, fit_budget):
        rows = [[f"{p.budget:g}", b(p.saved_bytes), str(p.recomputed_ops), b(p.step.peak),
                 b(p.reduce_overhead.peak if p.reduce_overhead else None),
                 escape(", ".join(w for w, on in (("rises", p.rises), ("fits", p.fits is True), ("over", p.fits is False),
                                                  ("largest that fits", fit_budget == p.budget)) if on))]
                for p in points]
        return _table(["budget", "saved", "recomputed ops", "step peak", "reduce-overhead", ""], rows)

    if fit.budgets:
        body += "<h3>activation_memory_budget</h3>" + sweep(fit.budgets, fit.fit_budget)
    for region in dict.fromkeys(p.region for p in fit.region_budgets):
        body += (f"<h3>Region {region}'s own budget (region_activation_memory_budget)</h3>"
                 + sweep([p for p in fit.region_budgets if p.region == region], None))
    body += "".join(f'<p class="note">{escape(n)}</p>' for n in fit.notes)
    return _section("fit", "Will it fit", body)


def shapes_section(report, limit: int = 200) -> str:
    """``graphtool shapes``' part of a page: the total, the loud line past ``recompile_limit``, each step (the first
    ``limit``) with the sizes that vary, what compiled and what cudagraph trees did, and the advice.

    >>> from graphtool.analysis.shapes import ShapeReport, ShapeStep
    >>> step = ShapeStep(1, {"x:0": 16}, 1, (), (), False, 1, 0, 0)
    >>> r = ShapeReport(1, "the schedule passed in", "inductor", (step,), 1, 0, 8, None, 0, 1, 1, 0, 0, 1)
    >>> "<td>1</td><td>x:0=16</td><td>1</td>" in shapes_section(r)
    True
    """
    mode = f"; {report.mode}: {report.mode_why}" if report.mode_why else ""
    body = f'<p class="verdict">{escape(report.summary())}</p><p class="note">schedule: {escape(report.source + mode)}</p>'
    loud = report.loud()
    if loud:
        body += f'<p class="finding">{escape(loud)}</p>'
    rows = []
    for st in report.per_step[:limit]:
        did = report.run_bits(st)
        rows.append([str(st.step), escape(", ".join(f"{k}={v}" for k, v in [*st.sizes.items(), *st.values.items()])),
                     str(st.graphs_compiled),
                     escape("; ".join(st.recompiles)), escape(", ".join(st.symbolic)), escape(", ".join(did))])
    body += _table(["step", "sizes", "graphs compiled", "recompile (guard failure)", "symbolic", "CUDA graphs"], rows)
    if len(report.per_step) > limit:
        body += f'<p class="note">{len(report.per_step) - limit} more steps: --format json has every one</p>'
    body += "".join(f'<p class="note">advice: {escape(a.text)}</p>' for a in report.advice)
    return _section("shapes", "Changing shapes", body)


def bench_section(report) -> str:
    """``graphtool bench``'s part of a page: each mode's status and timings, as the terminal's table has them.

    >>> from graphtool.analysis.bench_report import BenchReport, ModeReport
    >>> from graphtool.analysis.timing_stats import summarize
    >>> r = BenchReport("m.py", "model", "cpu", "0", "2", {}, False, 1, 10, 3,
    ...                 (ModeReport("eager", "ok", None, summarize([2.0]), 1.0, 0.0, None, None),), None)
    >>> "<td>eager</td><td>ok</td><td>2.0000</td>" in bench_section(r)
    True
    """
    what = ("a training step: its own backward and optimizer" if report.own_step else
            "forward + backward" if report.backward else "forward")
    rows = []
    for m in report.modes:
        st = m.stats
        rows.append([escape(m.name), escape(m.status), f"{st.median_ms:.4f}" if st else "-",
                     f"{st.min_ms:.4f}-{st.max_ms:.4f}" if st else "-", f"{st.spread_pct:.1f}%" if st else "-",
                     f"{m.speedup:.2f}x" if m.speedup else "-"])
    body = (f'<p class="note">{escape(what)}, {escape(report.device)}; {report.repeat} x {report.iters} iterations after '
            f'{report.warmup} warm-up</p>'
            + _table(["mode", "status", "median ms", "min-max ms", "spread", "speedup"], rows))
    notes = [*report.warnings(), *(f"{m.name}: {m.reason}" for m in report.modes if m.reason)]
    if report.random_ops_note():
        notes.append(report.random_ops_note())
    notes += [i["text"] for i in report.insights()]
    body += "".join(f'<p class="note">{escape(n)}</p>' for n in notes)
    return _section("bench", "Eager against compiled", body)


def format_view(sections: list[str], *, title: str, summary: str, text: str = "") -> str:
    """The report page's view of one report (``graphtool.cudagraphs(model, x)`` shown in a notebook): the
    page's own ``sections`` for it and, when given, the terminal's findings (``text``), as a page of its own.

    >>> page = format_view([], title="Net", summary="lint passed", text="no graph break")
    >>> "<h2>Findings" in page and "no graph break" in page
    True
    """
    sections = list(sections)
    if text.strip():
        sections.append(_section("findings", "Findings", f'<pre class="diagnostics">{escape(text)}</pre>'))
    return format_page({"title": title, "summary": summary, "sections": sections, "pictures": [], "svgs": []})


def inline_frame(page: str, *, height: int) -> str:
    """``page`` in an ``<iframe srcdoc>`` for a notebook's output cell: its style and script stay inside,
    nothing is fetched, the notebook's own page is untouched.

    >>> inline_frame("<p>a & b</p>", height=100).split(" style=")[0]
    '<iframe class="graphtool" srcdoc="&lt;p&gt;a &amp; b&lt;/p&gt;"'
    """
    return (f'<iframe class="graphtool" srcdoc="{escape(page, quote=True)}" style="width: 100%; height: {height}px; '
            'border: 1px solid #ddd" sandbox="allow-scripts"></iframe>')
