"""Every finding of one model as a diagnostic: where (the user's file:line and its source), what,
how to fix it, and the graph node it concerns, for the HTML report.

The facts come from the analyses the terminal commands print (graph breaks, mutations and aliasing,
devices, the CUDA-graph verdict); this module only gathers them into one list, each tied to a node
of the pictures when one is known: a mutated input's placeholder, a node off the main device, the
op torch's CUDA-graph check names, else the first node made by the same line.

Example::

    >>> f = Finding("graph-break", "graph break", "Graph break in user code", "m.py:3", None, "move it out", None)
    >>> f.to_dict()["node"] is None
    True
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from graphtool.analysis.diagnostics import GB_URL
from graphtool.analysis.node_facts import source_snippet
from graphtool.analysis.trace_report import break_info

SEVERITY = {"graph-break": "warning", "skipped-frame": "error", "mutation": "info", "aliasing": "info",
            "device": "warning", "cudagraphs": "error", "cudagraphs-note": "info", "no-graph": "error"}


@dataclass(frozen=True)
class NodeRef:
    region: int
    graph: str  # forward | backward
    node: str  # the node's name in that graph (its id in the picture)

    def to_dict(self) -> dict:
        return {"region": self.region, "graph": self.graph, "node": self.node}


@dataclass(frozen=True)
class Finding:
    kind: str  # graph-break | skipped-frame | mutation | aliasing | device | cudagraphs | cudagraphs-note | no-graph
    title: str
    message: str
    source: str | None  # file:line
    snippet: tuple[tuple[int, str], ...] | None
    fix: str | None
    node: NodeRef | None
    line: int | None = None
    url: str | None = None  # torch's page for a graph break's gb id, as the CLI diagnostics and the notebook link it

    def to_dict(self) -> dict:
        return {
            "kind": self.kind, "severity": SEVERITY.get(self.kind, "info"), "title": self.title, "message": self.message,
            "source": self.source, "line": self.line, "snippet": [list(x) for x in self.snippet] if self.snippet else None,
            "fix": self.fix, "node": self.node.to_dict() if self.node else None, "url": self.url,
        }


def _finding(kind, title, message, file, line, fix, node) -> Finding:
    snippet = source_snippet(file, line, context=1)
    return Finding(kind, title, message, f"{file}:{line}" if file and line else file, tuple(snippet) if snippet else None,
                   fix or None, node, line)


class NodeIndex:
    """Finds the picture node a finding concerns: by name in a graph, or by the user's line."""

    def __init__(self, facts: dict[tuple[int, str], dict[str, dict]]):
        self._facts = facts

    def named(self, region, graph, name) -> NodeRef | None:
        if region is None or graph is None or name is None:
            return None
        return NodeRef(region, graph, name) if name in self._facts.get((region, graph), {}) else None

    def at_line(self, source: str | None, region=None, graph=None) -> NodeRef | None:
        if not source:
            return None
        for (reg, g), facts in self._facts.items():
            if (region is not None and reg != region) or (graph is not None and g != graph):
                continue
            for name, fact in facts.items():
                if fact.get("source") == source and fact.get("kind") == "op":
                    return NodeRef(reg, g, name)
        return None

    def input_named(self, input_name: str, region=None) -> NodeRef | None:
        for (reg, g), facts in self._facts.items():
            if g != "forward" or (region is not None and reg != region):
                continue
            for name, fact in facts.items():
                if fact.get("kind") != "op" and fact.get("name") == input_name:
                    return NodeRef(reg, g, name)
        return None


def build_findings(trace, breaks, verdict, devices, index: NodeIndex, highlights: dict | None = None) -> tuple[Finding, ...]:
    """All findings, errors first, then warnings, then notes; within each: no graph, breaks, CUDA graphs, devices, mutations.

    ``trace`` is the TraceReport, ``breaks`` the capture's raw graph breaks (with torch's hint),
    ``verdict`` and ``devices`` may be None; ``highlights`` maps ``(region, graph)`` to the node
    names the pictures mark with a reason."""
    out: list[Finding] = []
    highlights = highlights or {}
    if trace.no_graph:
        out.append(_finding("no-graph", "no graph captured", trace.no_graph, None, None, None, None))
    for b in _distinct(breaks):
        kind = "skipped-frame" if getattr(b, "skips_frame", False) else "graph-break"
        title = "frame skipped" if kind == "skipped-frame" else "graph break"
        if getattr(b, "code", None):
            title += f" ({b.code})"
        at = break_info(b)  # where it points, as trace and lint place it
        src = f"{at.file}:{at.line}" if at.file and at.line else None
        found = _finding(kind, title, at.message(), at.file, at.line, at.help, index.at_line(src))
        code = getattr(b, "code", None)
        out.append(replace(found, url=GB_URL.format(code=code)) if code else found)
    if verdict is not None:
        for r in verdict.reasons:
            if r.code in ("graph-break", "host-sync") and r.region is None:
                continue  # the graph break itself is listed above
            src = str(r.source) if r.source else None
            node = _reason_node(r, src, index, highlights)
            kind = "cudagraphs" if r.skips else "cudagraphs-note"
            title = f"CUDA graphs ({verdict.backend}): {'skipped' if r.skips else 'note'}: {r.code}"
            out.append(_finding(kind, title, r.message, r.source.file if r.source else None,
                                r.source.line if r.source else None, r.fix, node))
    if devices is not None:
        for g in devices.graphs:
            copied = {c.name for c in g.copies}
            for n in g.off_device:
                if n.name in copied:
                    continue  # said once, as the copy it is
                src = n.source
                out.append(_finding("device", f"runs on {devices.show(n.device)}, not {devices.shown_device}", f"{n.name}: {n.op}",
                                    src.file if src else None, src.line if src else None,
                                    "create the tensor on the model's device, or keep the value on it", index.named(g.region, g.graph, n.name)))
            for c in g.copies:
                src = c.source
                out.append(_finding("device", f"copy {devices.show(c.src_device)} -> {devices.show(c.dst_device)}", f"{c.name}: {c.op}",
                                    src.file if src else None, src.line if src else None,
                                    "a copy between devices is a host sync: keep the tensor on one device",
                                    index.named(g.region, g.graph, c.name)))
    out.extend(_mutation_findings(trace.mutations, index))
    for o in trace.mutations.aliased_outputs:
        of = o.alias_of
        what = "a view of" if o.is_view else "shares storage with"
        target = alias_target(of)
        node = index.input_named(of["name"]) if of.get("kind") == "input" and of.get("name") else None
        out.append(_finding("aliasing", f"output {o.index} aliases {target}", f"output {o.index} is {what} {target}",
                            None, None, None, node))
    for a in trace.mutations.input_aliases:
        out.append(_finding("aliasing", f"inputs {' and '.join(a.names)} share storage", a.relation.replace("_", " "), None, None,
                            None, index.input_named(a.names[0])))
    order = {"error": 0, "warning": 1, "info": 2}
    return tuple(sorted(out, key=lambda f: order[SEVERITY.get(f.kind, "info")]))


def _mutation_findings(report, index: NodeIndex) -> list[Finding]:
    """One finding per kind of mutation at one line (the three statistics of a BatchNorm), and one for all an
    optimizer's step writes: a whole compiled training step writes every parameter and its state, which as one
    finding each buried the graph breaks (211 findings for a 52-parameter GPT step)."""
    from graphtool.analysis.diagnostics import some_names
    from graphtool.analysis.mutations import optimizer_summary

    groups: dict[tuple, list] = {}
    for m in report.mutated:
        kinds = [k for k, on in (("data", m.mutates_data), ("metadata", m.mutates_metadata), ("storage", m.mutates_storage)) if on]
        how = ", ".join(kinds) + (" under no_grad" if m.under_no_grad else "")
        src = m.source
        kind = "optimizer" if m.by_optimizer else m.kind
        groups.setdefault((kind, how, src.file if src else None, src.line if src else None, m.mutated_in, m.note), []).append(m)
    out = []
    for (kind, how, file, line, regions, note), members in groups.items():
        first = members[0]
        node = index.input_named(first.name, regions[0] if regions else (first.regions[0] if first.regions else None))
        if kind == "optimizer":
            out.append(_finding("mutation", "optimizer step: parameters and state updated in place", optimizer_summary(members),
                                file, line, "accept it with `mutations --check --allow optimizer_state`", node))
            continue
        fix = None if kind == "buffer" else "mutated inputs make torch.compile add copies and CUDA graphs skip: return a new tensor instead"
        noun = kind.replace("_", " ")
        if len(members) == 1:
            title, message = f"{noun} {first.name} mutated ({how})", note or f"{first.name} is written in place"
        else:
            title = f"{len(members)} {noun}s mutated ({how})"
            message = (f"{note}: " if note else "written in place: ") + some_names([m.name for m in members])
        out.append(_finding("mutation", title, message, file, line, fix, node))
    return out


def alias_target(of: dict) -> str:
    """``input x``, ``output 1``, ``an intermediate`` (AOT names no intermediate).

    >>> alias_target({"kind": "intermediate", "name": None, "index": None})
    'an intermediate'
    """
    kind, name, index = of.get("kind"), of.get("name"), of.get("index")
    if name:
        return f"{kind} {name}"
    if index is not None:
        return f"{kind} {index}"
    return f"an {kind}" if kind and kind[0] in "aeiou" else f"a {kind}"


def _distinct(breaks):
    seen, out = set(), []
    for b in breaks:
        key = (b.file, b.line, b.reason)
        if key not in seen:
            seen.add(key)
            out.append(b)
    return out


def _reason_node(r, src, index: NodeIndex, highlights: dict) -> NodeRef | None:
    marked = highlights.get((r.region, r.graph), {})
    by_line = index.at_line(src, r.region, r.graph)
    if by_line is not None:
        return by_line
    for name, why in marked.items():
        if "cudagraphs" in why:
            return index.named(r.region, r.graph, name)
    return None
