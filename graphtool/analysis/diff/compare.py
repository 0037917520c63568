"""What changed from one graphtool document to another, model by model, and what of it got worse.

:func:`diff_documents` pairs the models of two documents (by path and entry; one model on each side pairs
whatever its name), compares each pair's facts (:mod:`.documents`) in the order ``graphtool diff`` shows them,
and judges the ``--fail-on`` list (:func:`parse_fail_on`) against them.

Example::

    >>> from graphtool.analysis.diff.documents import Break, Facts
    >>> old = Facts("m.py", breaks=(Break("gb0059", "gb0059", "print", "/a/m.py", 13, "print(x)"),))
    >>> new = Facts("m.py", breaks=(Break("gb0059", "gb0059", "print", "/a/m.py", 15, "print(x)"),
    ...                             Break("gb0025", "gb0025", "graph_break()", "/a/m.py", 9, "torch._dynamo.graph_break()")))
    >>> d = compare_models(old, new)
    >>> [b.line for b in d.breaks.added], [(m.before_line, m.after_line) for m in d.breaks.moved]
    ([9], [(13, 15)])
    >>> d.worse(parse_fail_on("new-breaks"))
    {'new-breaks': ['1 new graph break']}
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from graphtool.analysis.diff.documents import Break, Cudagraphs, Document, Facts, Frame, check_same_kind, models
from graphtool.analysis.diff.matching import match_breaks
from graphtool.errors import UsageError
from graphtool.text import count

#: what ``--fail-on`` takes; ``memory`` takes a threshold (``memory:+10%``)
FAIL_ON = ("new-breaks", "recompiles", "cudagraphs", "mutations", "memory", "coverage")


@dataclass(frozen=True)
class FailOn:
    """One ``--fail-on`` item: its name and, for memory, the growth allowed in percent."""

    name: str
    percent: float = 0.0

    def __str__(self) -> str:
        return f"{self.name}:+{self.percent:g}%" if self.percent else self.name


def parse_fail_on(text: str | None) -> tuple[FailOn, ...]:
    """``new-breaks,cudagraphs,recompiles,memory:+10%`` as :class:`FailOn` items; a UsageError (exit 2) names an
    item it does not know.

    >>> [str(f) for f in parse_fail_on("new-breaks, memory:+10%")]
    ['new-breaks', 'memory:+10%']
    >>> parse_fail_on("breaks")
    Traceback (most recent call last):
    ...
    graphtool.errors.UsageError: --fail-on 'breaks': not one of new-breaks, recompiles, cudagraphs, mutations, memory, coverage
    """
    out = []
    for raw in (text or "").split(","):
        item = raw.strip()
        if not item:
            continue
        name, _, arg = item.partition(":")
        if name not in FAIL_ON:
            raise UsageError(f"--fail-on {item!r}: not one of {', '.join(FAIL_ON)}",
                             hint="e.g. --fail-on new-breaks,cudagraphs,recompiles,memory:+10%")
        if arg and name != "memory":
            raise UsageError(f"--fail-on {item!r}: only memory takes a threshold (memory:+10%)")
        percent = 0.0
        if arg:
            m = re.fullmatch(r"\+?\s*([0-9]*\.?[0-9]+)\s*%", arg.strip())
            if m is None:
                raise UsageError(f"--fail-on {item!r}: the threshold is a growth in percent, such as memory:+10%")
            percent = float(m.group(1))
        out.append(FailOn(name, percent))
    return tuple(out)


@dataclass(frozen=True)
class Moved:
    """A break that only moved: the same kind, file and source text at another line."""

    before: Break
    after: Break

    @property
    def before_line(self) -> int | None:
        return self.before.line

    @property
    def after_line(self) -> int | None:
        return self.after.line

    def to_dict(self) -> dict:
        b = self.after
        return {"file": b.file, "before_line": self.before.line, "after_line": b.line, "code": b.code, "reason": b.reason,
                "source_text": b.source_text, "before_file": self.before.file if self.before.file != b.file else None}


@dataclass(frozen=True)
class Breaks:
    before: int
    after: int
    added: tuple[Break, ...]
    removed: tuple[Break, ...]
    moved: tuple[Moved, ...]
    unchanged: int
    more_often: tuple[tuple[Break, Break], ...] = ()  # the same site, breaking more often (a log's or lint's count)

    def to_dict(self) -> dict:
        return {"before": self.before, "after": self.after, "added": [b.to_dict() for b in self.added],
                "removed": [b.to_dict() for b in self.removed], "moved": [m.to_dict() for m in self.moved],
                "unchanged": self.unchanged,
                "more_often": [{**b.to_dict(), "before_count": a.count} for a, b in self.more_often]}


@dataclass(frozen=True)
class Frames:
    """Recompiles (or frames run eagerly): how many on each side, and which appeared or went."""

    before: int
    after: int
    added: tuple[Frame, ...]
    removed: tuple[Frame, ...]

    def to_dict(self) -> dict:
        return {"before": self.before, "after": self.after, "added": [f.to_dict() for f in self.added],
                "removed": [f.to_dict() for f in self.removed]}


@dataclass(frozen=True)
class Change:
    """A number before and after (None: that side does not say)."""

    before: float | None
    after: float | None

    @property
    def changed(self) -> bool:
        return self.before != self.after

    @property
    def percent(self) -> float | None:
        if self.before in (None, 0) or self.after is None:
            return None
        return round(100.0 * (self.after - self.before) / self.before, 1)

    def to_dict(self) -> dict:
        return {"before": self.before, "after": self.after, "change_pct": self.percent}


@dataclass(frozen=True)
class Pairs:
    """Items (mutations, aliases) that appeared and went."""

    added: tuple
    removed: tuple

    def to_dict(self, names: tuple[str, ...]) -> dict:
        return {"added": [dict(zip(names, x)) for x in self.added], "removed": [dict(zip(names, x)) for x in self.removed]}


@dataclass(frozen=True)
class CudagraphsChange:
    before: Cudagraphs | None
    after: Cudagraphs | None
    gained: tuple[str, ...]  # skip reasons after and not before
    lost: tuple[str, ...]
    changes: tuple[str, ...]  # each change in words
    worse: tuple[str, ...]  # the changes that are worse

    def to_dict(self) -> dict:
        return {"before": self.before.to_dict() if self.before else None, "after": self.after.to_dict() if self.after else None,
                "skips_gained": list(self.gained), "skips_lost": list(self.lost), "changes": list(self.changes),
                "worse": list(self.worse)}


@dataclass(frozen=True)
class ModelDiff:
    """One model's changes, in the order graphtool diff shows them."""

    before_name: str
    after_name: str
    breaks: Breaks | None
    recompiles: Frames | None
    skipped_frames: Frames | None
    regions: Change | None
    graphs: Change | None
    cudagraphs: CudagraphsChange | None
    mutations: Pairs | None
    aliases: Pairs | None
    saved_bytes: Change | None
    step_peak: Change | None
    nodes: tuple[tuple[int, str, Change], ...]  # (region, graph, nodes) where they changed
    compile_seconds: Change | None
    coverage: dict | None  # {"before": ..., "after": ...}
    calls_captured: Change | None
    fallbacks_to_eager: Change | None
    said: frozenset = field(default_factory=frozenset)  # which facts both sides hold (for --fail-on's check)

    @property
    def name(self) -> str:
        return self.after_name if self.after_name == self.before_name else f"{self.before_name} -> {self.after_name}"

    def worse(self, fail_on: tuple[FailOn, ...]) -> dict[str, list[str]]:
        """For each ``fail_on`` item that got worse, why (``{"new-breaks": ["1 new graph break"]}``)."""
        out: dict[str, list[str]] = {}
        for f in fail_on:
            why = _WORSE[f.name](self, f)
            if why:
                out[str(f)] = why
        return out

    def to_dict(self) -> dict:
        def opt(x, *a):
            return x.to_dict(*a) if x is not None else None

        return {
            "before": self.before_name, "after": self.after_name,
            "graph_breaks": opt(self.breaks), "recompiles": opt(self.recompiles), "skipped_frames": opt(self.skipped_frames),
            "regions": opt(self.regions), "graphs": opt(self.graphs), "cudagraphs": opt(self.cudagraphs),
            "mutations": opt(self.mutations, ("input", "kind", "mutates")), "aliases": opt(self.aliases, ("output", "alias_of")),
            "memory": None if self.saved_bytes is None and self.step_peak is None else
            {"saved_activation_bytes": opt(self.saved_bytes), "step_peak": opt(self.step_peak)},
            "nodes": [{"region": r, "graph": g, **c.to_dict()} for r, g, c in self.nodes],
            "compile_time": opt(self.compile_seconds),
            "calls_captured": opt(self.calls_captured), "fallbacks_to_eager": opt(self.fallbacks_to_eager),
            "coverage": self.coverage,
        }


def _worse_breaks(d: ModelDiff, f: FailOn) -> list[str]:
    if d.breaks is None or not d.breaks.added:
        return []
    return [count(len(d.breaks.added), "new graph break")]


def _worse_recompiles(d: ModelDiff, f: FailOn) -> list[str]:
    r = d.recompiles
    if r is None or (r.after <= r.before and not r.added):
        return []
    return [f"recompiles {r.before} -> {r.after}" + (f" ({count(len(r.added), 'new reason')})" if r.added else "")]


def _worse_cudagraphs(d: ModelDiff, f: FailOn) -> list[str]:
    return list(d.cudagraphs.worse) if d.cudagraphs is not None else []


def _worse_mutations(d: ModelDiff, f: FailOn) -> list[str]:
    if d.mutations is None or not d.mutations.added:
        return []
    return [count(len(d.mutations.added), "new input mutation")]


def _worse_memory(d: ModelDiff, f: FailOn) -> list[str]:
    out = []
    for label, c in (("saved activations", d.saved_bytes), ("step peak", d.step_peak)):
        if c is None or c.before is None or c.after is None or c.after <= c.before:
            continue
        pct = c.percent
        if pct is None or pct > f.percent:
            out.append(f"{label} {_bytes(c.before)} -> {_bytes(c.after)}" + (f" (+{pct:g}%)" if pct is not None else ""))
    return out


def _worse_coverage(d: ModelDiff, f: FailOn) -> list[str]:
    out = []
    if d.calls_captured is not None and None not in (d.calls_captured.before, d.calls_captured.after) \
            and d.calls_captured.after < d.calls_captured.before:
        out.append(f"calls captured {d.calls_captured.before:g} -> {d.calls_captured.after:g}")
    fb = d.fallbacks_to_eager
    if fb is not None and None not in (fb.before, fb.after) and fb.after > fb.before:
        out.append(f"fallbacks to eager {fb.before:g} -> {fb.after:g}")
    if d.coverage is not None:
        b, a = _share(d.coverage.get("before")), _share(d.coverage.get("after"))
        if b is not None and a is not None and a < b:
            out.append(f"op coverage {b:.0%} -> {a:.0%}")
    return out


def _share(c) -> float | None:
    return c.get("share") if isinstance(c, dict) and isinstance(c.get("share"), (int, float)) else None


_WORSE = {"new-breaks": _worse_breaks, "recompiles": _worse_recompiles, "cudagraphs": _worse_cudagraphs,
          "mutations": _worse_mutations, "memory": _worse_memory, "coverage": _worse_coverage}

#: which facts each --fail-on item judges (a run must have them on both sides, or the gate would judge nothing)
_NEEDS = {"new-breaks": ("breaks",), "recompiles": ("recompiles",), "cudagraphs": ("cudagraphs",),
          "mutations": ("mutations",), "memory": ("saved_bytes", "step_peak"),
          "coverage": ("calls_captured", "fallbacks_to_eager", "coverage")}
_WHERE = {"new-breaks": "trace, lint or log", "recompiles": "lint, shapes or log", "cudagraphs": "cudagraphs (or trace --cudagraphs)",
          "mutations": "trace or mutations", "memory": "memory", "coverage": "trace or lint"}


def _bytes(n: float) -> str:
    for unit, size in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if abs(n) >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n:g} B"


def _frames(before: tuple[Frame, ...] | None, after: tuple[Frame, ...] | None, root_b, root_a) -> Frames | None:
    if before is None or after is None:
        return None
    from graphtool.analysis.diff.documents import file_key

    def keys(frames, root):
        return {(f.function, file_key(f.file, root), f.reason): f for f in frames}

    kb, ka = keys(before, root_b), keys(after, root_a)
    return Frames(len(before), len(after), tuple(f for k, f in ka.items() if k not in kb),
                  tuple(f for k, f in kb.items() if k not in ka))


def _change(before, after) -> Change | None:
    return None if before is None and after is None else Change(before, after)


def _pairs(before, after) -> Pairs | None:
    if before is None or after is None:
        return None
    return Pairs(tuple(x for x in after if x not in before), tuple(x for x in before if x not in after))


def _cudagraphs(before: Cudagraphs | None, after: Cudagraphs | None) -> CudagraphsChange | None:
    if before is None and after is None:
        return None
    if before is None or after is None:
        return CudagraphsChange(before, after, (), (), ("only one side has a CUDA-graph verdict",), ())
    gained = tuple(s for s in after.skips if s not in before.skips)
    lost = tuple(s for s in before.skips if s not in after.skips)
    changes, worse = [], []

    def note(text: str, bad: bool) -> None:
        changes.append(text)
        if bad:
            worse.append(text)

    if before.eligible != after.eligible and None not in (before.eligible, after.eligible):
        note(f"{'eligible' if before.eligible else 'not eligible'} -> {'eligible' if after.eligible else 'not eligible'}",
             before.eligible and not after.eligible)
    if (before.partitions_graphed, before.partitions) != (after.partitions_graphed, after.partitions) \
            and None not in (before.partitions_graphed, after.partitions_graphed):
        note(f"partitions graphed {before.partitions_graphed}/{before.partitions} -> {after.partitions_graphed}/{after.partitions}",
             after.partitions_graphed < before.partitions_graphed)
    if before.ops_percent != after.ops_percent and None not in (before.ops_percent, after.ops_percent):
        note(f"ops CUDA-graphed {before.ops_percent:g}% -> {after.ops_percent:g}%", after.ops_percent < before.ops_percent)
    for s in gained:
        note(f"skip gained: {s}", True)
    for s in lost:
        note(f"skip lost: {s}", False)
    if before.steady != after.steady and None not in (before.steady, after.steady):
        note(f"steady state {'reached' if before.steady else 'not reached'} -> {'reached' if after.steady else 'not reached'}",
             before.steady and not after.steady)
    if (before.rerecords or 0) != (after.rerecords or 0) and None not in (before.rerecords, after.rerecords):
        note(f"re-recordings {before.rerecords} -> {after.rerecords}", after.rerecords > before.rerecords)
    return CudagraphsChange(before, after, gained, lost, tuple(changes), tuple(worse))


def compare_models(before: Facts, after: Facts) -> ModelDiff:
    """The changes from ``before`` to ``after``, one model's facts each."""
    breaks = None
    if before.breaks is not None and after.breaks is not None:
        m = match_breaks(before.breaks, after.breaks, before.root, after.root)
        often = tuple((a, b) for a, b in m.same + m.moved if b.count > a.count)
        breaks = Breaks(len(before.breaks), len(after.breaks), m.added, m.removed,
                        tuple(Moved(a, b) for a, b in m.moved), len(m.same), often)
    nb = {(r, g): n for r, g, n in before.nodes or ()}
    na = {(r, g): n for r, g, n in after.nodes or ()}
    nodes = tuple((r, g, Change(nb.get((r, g)), na.get((r, g)))) for r, g in sorted(set(nb) | set(na), key=lambda k: (k[0], k[1] != "forward"))
                  if nb.get((r, g)) != na.get((r, g))) if before.nodes is not None and after.nodes is not None else ()
    coverage = None
    if before.coverage is not None or after.coverage is not None:
        coverage = {"before": before.coverage, "after": after.coverage}
    said = frozenset(k for k in ("breaks", "recompiles", "cudagraphs", "mutations", "saved_bytes", "step_peak", "calls_captured",
                                 "fallbacks_to_eager", "coverage")
                     if getattr(before, k) is not None and getattr(after, k) is not None)
    return ModelDiff(
        before.name, after.name, breaks,
        _frames(before.recompiles, after.recompiles, before.root, after.root),
        _frames(before.skipped_frames, after.skipped_frames, before.root, after.root),
        _change(before.regions, after.regions), _change(before.graphs, after.graphs),
        _cudagraphs(before.cudagraphs, after.cudagraphs),
        _pairs(before.mutations, after.mutations), _pairs(before.aliases, after.aliases),
        _change(before.saved_bytes, after.saved_bytes), _change(before.step_peak, after.step_peak), nodes,
        _change(before.compile_seconds, after.compile_seconds), coverage,
        _change(before.calls_captured, after.calls_captured), _change(before.fallbacks_to_eager, after.fallbacks_to_eager),
        said,
    )


@dataclass(frozen=True)
class DiffReport:
    """Two documents compared: each side's versions, each model's changes, and the ``--fail-on`` verdict."""

    before: Document
    after: Document
    models: tuple[ModelDiff, ...]
    only_before: tuple[str, ...]  # models in one document and not the other
    only_after: tuple[str, ...]
    fail_on: tuple[FailOn, ...] = ()

    @property
    def kind(self) -> str:
        return self.before.family

    @property
    def failed(self) -> dict[str, list[str]]:
        """Each ``--fail-on`` item that got worse in some model, with why (``model: reason``)."""
        out: dict[str, list[str]] = {}
        for m in self.models:
            for item, why in m.worse(self.fail_on).items():
                out.setdefault(item, []).extend(f"{m.name}: {w}" if len(self.models) > 1 else w for w in why)
        return out

    @property
    def worse(self) -> dict[str, list[str]]:
        """What got worse, whether or not ``--fail-on`` lists it."""
        every = tuple(FailOn(n) for n in FAIL_ON)
        out: dict[str, list[str]] = {}
        for m in self.models:
            for item, why in m.worse(every).items():
                out.setdefault(item, []).extend(why)
        return out

    @property
    def passed(self) -> bool:
        return not self.failed

    def exit_code(self) -> int:
        """0 when no ``--fail-on`` item got worse, 1 when one did."""
        return 0 if self.passed else 1

    def summary(self) -> str:
        """``2 changes; worse: 1 new graph break`` as one line."""
        worse = self.worse
        parts = [w for items in worse.values() for w in items]
        verdict = "; ".join(parts) if parts else "nothing got worse"
        if self.fail_on:
            return ("diff failed (" + ", ".join(self.failed) + "): " if self.failed else "diff passed: ") + verdict
        return f"diff: {verdict}"

    def to_dict(self) -> dict:
        return {
            "before": self.before.to_dict(), "after": self.after.to_dict(), "kind": self.kind,
            "torch": {"before": self.before.torch_version, "after": self.after.torch_version},
            "models": [m.to_dict() for m in self.models],
            "only_before": list(self.only_before), "only_after": list(self.only_after),
            "worse": self.worse, "fail_on": [str(f) for f in self.fail_on], "failed": self.failed, "passed": self.passed,
        }


def diff_documents(before: Document, after: Document, fail_on: tuple[FailOn, ...] = ()) -> DiffReport:
    """Compare two documents of one kind (else a UsageError, exit 2); ``fail_on`` items whose facts neither
    document holds are refused too, so a gate never passes for judging nothing."""
    check_same_kind(before, after)
    left, right = models(before), models(after)
    if len(left) == 1 and len(right) == 1:
        pairs = [(left[0], right[0])]
        only_b, only_a = (), ()
    else:
        keyed = {_model_key(m): m for m in right}
        pairs = [(m, keyed[_model_key(m)]) for m in left if _model_key(m) in keyed]
        paired = {_model_key(m) for m in left}
        only_b = tuple(m.name for m in left if _model_key(m) not in keyed)
        only_a = tuple(m.name for m in right if _model_key(m) not in paired)
    diffs = tuple(compare_models(a, b) for a, b in pairs)
    for f in fail_on:
        if diffs and not any(k in d.said for d in diffs for k in _NEEDS[f.name]):
            raise UsageError(f"--fail-on {f}: {before.kind} documents say nothing it judges, so it would pass whatever changed",
                             hint=f"diff two {_WHERE[f.name]} documents for it, or leave it out of --fail-on")
    return DiffReport(before, after, diffs, only_b, only_a, fail_on)


def _model_key(m: Facts) -> str:
    import os

    path, _, entry = m.name.partition(":")
    return f"{os.path.basename(path)}:{entry}"
