"""A graphtool document as ``graphtool diff`` reads it: which command made it (its ``graphtool`` header), and each
model's facts in one shape whatever the command (:class:`Facts`).

Pure functions over parsed JSON; nothing here imports torch. A document that is not graphtool's, one from a
newer graphtool, or two documents of different kinds are refused with a :class:`~graphtool.errors.UsageError`
(exit 2) that says what was expected.

Example::

    >>> doc = read_document({"graphtool": {"command": "lint", "schema_version": 1, "graphtool_version": "0.1.0",
    ...                      "torch_version": "2.13.0"}, "models": []}, "before.json")
    >>> doc.kind, doc.torch_version
    ('lint', '2.13.0')
    >>> read_document([1, 2], "x.json")
    Traceback (most recent call last):
    ...
    graphtool.errors.UsageError: x.json: not a graphtool document: it holds a JSON array, not an object
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import PurePosixPath

from graphtool.errors import UsageError
from graphtool.schema import DOCUMENT_VERSIONS, HEADER

#: the kinds of document diff compares; a report's document is its trace's, so the two compare
DIFFABLE = ("trace", "report", "lint", "cudagraphs", "memory", "shapes", "mutations", "devices", "log")
SAME_KIND = {"report": "trace"}

_HINT = ("graphtool diff takes two documents a graphtool command wrote with --format json (trace, lint, cudagraphs, "
         "memory, shapes, mutations, devices, log)")


@dataclass(frozen=True)
class Document:
    """One side: the file it came from, the command that made it, its versions, and the parsed JSON."""

    name: str
    kind: str
    schema_version: int
    graphtool_version: str | None
    torch_version: str | None
    data: dict = field(repr=False)

    @property
    def family(self) -> str:
        """What it compares with: a report's document is a trace's."""
        return SAME_KIND.get(self.kind, self.kind)

    def to_dict(self) -> dict:
        return {"file": self.name, "command": self.kind, "schema_version": self.schema_version,
                "graphtool_version": self.graphtool_version, "torch_version": self.torch_version}


def read_document(data: object, name: str) -> Document:
    """The parsed JSON of file ``name`` as a :class:`Document`: its ``graphtool`` header read and checked (a
    document graphtool wrote before headers existed is recognised by its keys: a trace, a lint report, a
    ``graphtool log`` document)."""
    if not isinstance(data, dict):
        raise UsageError(f"{name}: not a graphtool document: it holds a JSON {_json_type(data)}, not an object", hint=_HINT)
    head = data.get(HEADER)
    if head is None and isinstance(data.get("models"), list) and data["models"] and isinstance(data["models"][0], dict) \
            and isinstance(data["models"][0].get(HEADER), dict):
        head = data["models"][0][HEADER]  # several models' documents in one: {"models": [doc, ...]}
    if head is None:
        kind = _recognised(data)
        if kind is None:
            raise UsageError(f"{name}: not a graphtool document: it has no '{HEADER}' header saying which command made it",
                             hint=_HINT)
        return Document(name, kind, 1, data.get("graphtool_version"), _torch_of(data), data)
    if not isinstance(head, dict) or not isinstance(head.get("command"), str):
        raise UsageError(f"{name}: its '{HEADER}' header is not graphtool's (it needs a 'command' and a 'schema_version')",
                         hint=_HINT)
    kind, version = head["command"], head.get("schema_version")
    if kind not in DOCUMENT_VERSIONS:
        raise UsageError(f"{name}: made by 'graphtool {kind}', a command this graphtool does not know",
                         hint="upgrade graphtool to the version that made it: pip install -U torch-graphtool")
    if not isinstance(version, int) or isinstance(version, bool):
        raise UsageError(f"{name}: its '{HEADER}' header has no integer schema_version (got {version!r})", hint=_HINT)
    if version > DOCUMENT_VERSIONS[kind]:
        raise UsageError(f"{name}: a {kind} document of schema version {version}, from a newer graphtool "
                         f"({head.get('graphtool_version', '?')}); this graphtool reads {kind} documents up to version "
                         f"{DOCUMENT_VERSIONS[kind]}", hint="upgrade graphtool: pip install -U torch-graphtool")
    if kind not in DIFFABLE:
        raise UsageError(f"{name}: a {kind} document; graphtool diff compares {', '.join(DIFFABLE)} documents", hint=_HINT)
    return Document(name, kind, version, head.get("graphtool_version"), head.get("torch_version") or _torch_of(data), data)


def check_same_kind(before: Document, after: Document) -> None:
    """Two documents of one kind (a report's and a trace's are one kind), else a UsageError naming both."""
    if before.family != after.family:
        raise UsageError(f"{before.name} is a {before.kind} document and {after.name} a {after.kind} document: "
                         "graphtool diff compares two documents of one kind",
                         hint=f"make both with the same command (graphtool {before.kind} ... --format json)")


def _recognised(data: dict) -> str | None:
    """The kind of a document without a header: a ``graphtool log`` document (its names are issue 46's), or a
    trace or lint document from before headers."""
    if "graphs_compiled" in data and isinstance(data.get("log"), dict):
        return "log"
    if data.get("schema_version") == 1 and "graphtool_version" in data:
        if isinstance(data.get("graphs"), list) and "graph_breaks" in data:
            return "trace"
        models = data.get("models")
        if isinstance(models, list) and all(isinstance(m, dict) and "graph_break_count" in m for m in models):
            return "lint"
    return None


def _torch_of(data: dict) -> str | None:
    log = data.get("log")
    return data.get("torch_version") or (log.get("torch_version") if isinstance(log, dict) else None)


def _json_type(value: object) -> str:
    return {list: "array", str: "string", int: "number", float: "number", bool: "boolean", type(None): "null"}.get(
        type(value), type(value).__name__)


# ---------------------------------------------------------------------------------------------- facts


@dataclass(frozen=True)
class Break:
    """A graph-break site: torch's gb id (else its reason) is its kind; ``count`` how often it broke."""

    kind: str
    code: str | None
    reason: str
    file: str | None
    line: int | None
    source_text: str | None = None
    count: int = 1

    def to_dict(self) -> dict:
        return {"file": self.file, "line": self.line, "code": self.code, "reason": self.reason,
                "source_text": self.source_text, "count": self.count}


@dataclass(frozen=True)
class Frame:
    """A recompile or a frame run eagerly: the function, where, and torch's reason."""

    function: str | None
    file: str | None
    line: int | None
    reason: str | None

    def to_dict(self) -> dict:
        return {"function": self.function, "file": self.file, "line": self.line, "reason": self.reason}


@dataclass(frozen=True)
class Cudagraphs:
    """The CUDA-graph verdict's comparable part."""

    eligible: bool | None
    backend: str | None
    partitions: int | None
    partitions_graphed: int | None
    ops_percent: float | None
    skips: tuple[str, ...]  # each reason that keeps a graph (or a partition) from being CUDA-graphed
    steady: bool | None = None  # the steady state replays without recording again
    recordings: int | None = None
    rerecords: int | None = None

    def to_dict(self) -> dict:
        return {"eligible": self.eligible, "backend": self.backend, "partitions": self.partitions,
                "partitions_graphed": self.partitions_graphed, "ops_percent": self.ops_percent, "skips": list(self.skips),
                "steady": self.steady, "recordings": self.recordings, "rerecords": self.rerecords}


@dataclass(frozen=True)
class Facts:
    """One model's facts from one document; None where the document does not say (a lint document has no memory)."""

    name: str  # the model's path (``path:entry``), or the document's name
    breaks: tuple[Break, ...] | None = None
    recompiles: tuple[Frame, ...] | None = None
    skipped_frames: tuple[Frame, ...] | None = None
    regions: int | None = None
    graphs: int | None = None
    nodes: tuple[tuple[int, str, int], ...] | None = None  # (region, "forward"/"backward", nodes)
    cudagraphs: Cudagraphs | None = None
    mutations: tuple[tuple[str, str, str], ...] | None = None  # (input, kind, what it mutates)
    aliases: tuple[tuple[int, str], ...] | None = None  # (output index, the input it aliases)
    saved_bytes: int | None = None  # activations saved for backward (compiled)
    step_peak: int | None = None  # the training step's predicted peak (memory --fit)
    compile_seconds: float | None = None
    calls_captured: int | None = None
    fallbacks_to_eager: int | None = None
    coverage: dict | None = None  # trace's and lint's ``coverage``
    root: str | None = field(default=None, compare=False)  # the model's folder: paths under it compare relative to it


def models(doc: Document) -> list[Facts]:
    """Each model's :class:`Facts` in ``doc`` (a lint report or a several-model document holds more than one)."""
    data = doc.data
    if doc.kind == "lint":
        return [_lint_model(m) for m in _list(data.get("models")) if isinstance(m, dict)]
    if doc.kind == "log":
        return [_log_facts(data, doc.name)]
    items = [m for m in _list(data.get("models")) if isinstance(m, dict)] if HEADER not in data and "models" in data else [data]
    return [_model_facts(doc.family, m, doc.name) for m in items]


def _list(value) -> list:
    return value if isinstance(value, list) else []


def _name(path: str | None, entry: str | None, fallback: str) -> str:
    if not path:
        return fallback
    return f"{path}:{entry}" if entry else str(path)


def _root(path: str | None) -> str | None:
    return os.path.dirname(os.path.abspath(path)) if path else None


def _breaks(items, *, code="code", count="count") -> tuple[Break, ...]:
    out = []
    for b in _list(items):
        if not isinstance(b, dict):
            continue
        reason = str(b.get("reason") or "")
        gb = b.get(code) or b.get("code")
        out.append(Break(kind=gb or reason, code=gb, reason=reason, file=b.get("file"), line=_int(b.get("line")),
                         source_text=b.get("source_text") or (b.get("source") if isinstance(b.get("source"), str) else None),
                         count=_int(b.get(count)) or 1))
    return tuple(out)


def _frames(items, function="function") -> tuple[Frame, ...]:
    return tuple(Frame(f.get(function), f.get("file"), _int(f.get("line")), None if f.get("reason") is None else str(f.get("reason")))
                 for f in _list(items) if isinstance(f, dict))


def _int(value) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _mutations(doc: dict) -> tuple | None:
    m = doc.get("mutations")
    if not isinstance(m, dict):
        return None
    out = []
    for i in _list(m.get("inputs")):
        what = [w for w, key in (("data", "mutates_data"), ("metadata", "mutates_metadata"), ("storage", "mutates_storage"))
                if i.get(key)]
        if what:
            out.append((str(i.get("name")), str(i.get("kind")), "+".join(what)))
    return tuple(out)


def _aliases(doc: dict) -> tuple | None:
    a = doc.get("aliasing")
    if not isinstance(a, dict):
        return None
    return tuple((int(o.get("index", 0)), str(o["alias_of"])) for o in _list(a.get("outputs"))
                 if isinstance(o, dict) and o.get("alias_of") is not None)


def _nodes(graphs) -> tuple:
    out = []
    for g in _list(graphs):
        for side in ("forward", "backward"):
            summary = g.get(side) if isinstance(g, dict) else None
            if isinstance(summary, dict) and isinstance(summary.get("nodes"), int):
                out.append((int(g.get("region", 0)), side, summary["nodes"]))
    return tuple(out)


def _cudagraphs(v) -> Cudagraphs | None:
    if not isinstance(v, dict):
        return None
    cov = v.get("coverage") if isinstance(v.get("coverage"), dict) else {}
    steady = v.get("steady_state") if isinstance(v.get("steady_state"), dict) else {}
    skips = sorted({_skip_text(r) for r in _list(v.get("reasons")) if isinstance(r, dict) and r.get("skips")})
    return Cudagraphs(eligible=v.get("eligible"), backend=v.get("backend"), partitions=_int(cov.get("partitions")),
                      partitions_graphed=_int(cov.get("partitions_cudagraphed")), ops_percent=cov.get("percent"),
                      skips=tuple(skips), steady=steady.get("steady"), recordings=_int(steady.get("recordings")),
                      rerecords=_int(steady.get("rerecords")))


def _skip_text(reason: dict) -> str:
    code = reason.get("cg") or reason.get("code")
    return f"{code}: {reason.get('message')}" if code else str(reason.get("message"))


def _coverage_fields(d: dict) -> dict:
    return {"calls_captured": _int(d.get("calls_captured")), "fallbacks_to_eager": _int(d.get("fallbacks_to_eager")),
            "coverage": d.get("coverage") if isinstance(d.get("coverage"), dict) else None}


def _model_facts(family: str, d: dict, fallback: str) -> Facts:
    model = d.get("model") if isinstance(d.get("model"), dict) else {}
    name, root = _name(model.get("path"), model.get("entry"), fallback), _root(model.get("path"))
    if family == "trace":
        graphs = _list(d.get("graphs"))
        return Facts(name, breaks=_breaks(d.get("graph_breaks")), skipped_frames=_frames(d.get("skipped_frames")),
                     regions=len(graphs), nodes=_nodes(graphs), cudagraphs=_cudagraphs(d.get("cudagraphs")),
                     mutations=_mutations(d), aliases=_aliases(d), root=root, **_coverage_fields(d))
    if family == "cudagraphs":
        return Facts(name, regions=_int(model.get("regions_compiled")), cudagraphs=_cudagraphs(d.get("cudagraphs")), root=root)
    if family == "mutations":
        return Facts(name, regions=_int(model.get("regions_compiled")), mutations=_mutations(d), aliases=_aliases(d), root=root)
    if family == "memory":
        memory = d.get("memory") if isinstance(d.get("memory"), dict) else {}
        compiled = memory.get("compiled") if isinstance(memory.get("compiled"), dict) else {}
        fit = d.get("fit") if isinstance(d.get("fit"), dict) else {}
        step = fit.get("compiled") if isinstance(fit.get("compiled"), dict) else {}
        return Facts(name, regions=_int(model.get("regions_compiled")), saved_bytes=_int(compiled.get("bytes")),
                     step_peak=_int(step.get("peak")), root=root)
    if family == "shapes":
        s = d.get("shapes") if isinstance(d.get("shapes"), dict) else {}
        recompiles = s.get("recompiles")
        frames = _frames(recompiles) if isinstance(recompiles, list) else \
            tuple(Frame(None, None, None, None) for _ in range(_int(recompiles) or 0))
        return Facts(name, recompiles=frames, graphs=_int(s.get("graphs_compiled")), root=root)
    return Facts(name, regions=_int(model.get("regions_compiled")), root=root)  # devices: its regions


def _lint_model(m: dict) -> Facts:
    return Facts(_name(m.get("path"), m.get("entry"), "model"), breaks=_breaks(m.get("breaks"), count="occurrences"),
                 recompiles=_frames(m.get("recompiles")), skipped_frames=_frames(m.get("skipped_frames")),
                 graphs=_int(m.get("graph_count")), root=_root(m.get("path")), **_coverage_fields(m))


def _log_facts(d: dict, name: str) -> Facts:
    """A ``graphtool log`` document (issue 46's names): graph breaks with ``gb_id`` and ``count``, recompiles by
    ``frame``, ``graphs_compiled``, ``compile_time``, ``cudagraph_skips``, ``calls_captured`` and ``fallbacks_to_eager``."""
    skips = d.get("cudagraph_skips")
    cuda = None
    if isinstance(skips, list):
        texts = sorted({s if isinstance(s, str) else str(s.get("reason") or s.get("message")) for s in skips
                        if isinstance(s, (str, dict))})
        cuda = Cudagraphs(None, None, None, None, None, tuple(texts))
    return Facts("the run", breaks=_breaks(d.get("graph_breaks"), code="gb_id"), recompiles=_frames(d.get("recompiles"), "frame"),
                 graphs=_int(d.get("graphs_compiled")), cudagraphs=cuda, compile_seconds=_seconds(d.get("compile_time")),
                 **_coverage_fields(d))


def _seconds(value) -> float | None:
    """A log's compile time: seconds, or an object with its total (``total_seconds``, ``seconds``, ``total``)."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    if isinstance(value, dict):
        for key in ("total_seconds", "seconds", "total", "total_s"):
            if isinstance(value.get(key), (int, float)):
                return float(value[key])
    return None


def file_key(path: str | None, root: str | None) -> str | None:
    """A file as two sides compare it: under site-packages from the package down; under the model's folder relative
    to it (two checkouts of one script compare equal); else as written.

    >>> file_key("/ci/run1/models/m.py", "/ci/run1/models"), file_key("/venv/lib/site-packages/transformers/x.py", None)
    ('m.py', 'transformers/x.py')
    """
    if not path:
        return path
    norm = str(path).replace("\\", "/")
    for marker in ("/site-packages/", "/dist-packages/"):
        if marker in norm:
            return norm.rsplit(marker, 1)[1]
    if root:
        base = root.replace("\\", "/").rstrip("/") + "/"
        if norm.startswith(base):
            return norm[len(base):]
    if not os.path.isabs(norm) and root is None:
        return str(PurePosixPath(norm))
    return norm
