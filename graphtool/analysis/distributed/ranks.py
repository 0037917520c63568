"""Which ranks compile which graphs, and why a rank differs from rank 0, in words a user acts on.

Built from each rank's :class:`~graphtool.capture.distributed.ranks.RankSignature` and the traces of the ranks
:func:`~graphtool.capture.distributed.ranks.ranks_to_trace` chose (rank 0 always). Ranks that were not traced
take the result of a traced rank with the same signature (rank 1 for the ranks between 1 and the
last when the script reads its rank).

Example::

    >>> from graphtool.capture.distributed.ranks import RankSignature, TensorSig
    >>> x = lambda n: (TensorSig("x", (n, 512), "float32", False),)
    >>> sigs = [RankSignature(r, x(3 if r == 3 else 4), (), ()) for r in range(4)]
    >>> rep = build_ranks_report(4, sigs, {0: (1, ()), 3: (1, ())}, {3: "tensor 'x' size mismatch at index 0"})
    >>> rep.same, [g.ranks for g in rep.groups]
    (False, [(0, 1, 2), (3,)])
    >>> rep.groups[1].why[0]
    "rank 3's input 'x' is 3x512 (rank 0's 4x512): it compiles its own graphs; dynamo's guard: tensor 'x' size mismatch at index 0"
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

from graphtool.display_paths import display_path

SAME = "every rank compiles the same graphs"


@dataclass(frozen=True)
class RankBreak:
    file: Optional[str]
    line: Optional[int]
    reason: str
    code: Optional[str] = None  # the line of the user's code, as written

    @property
    def where(self) -> str:
        return f"{display_path(self.file)}:{self.line}" if self.file else "an unknown line"

    def to_dict(self) -> dict:
        return {"file": self.file, "line": self.line, "reason": self.reason, "code": self.code}

    @property
    def what(self) -> str:
        return f"`{self.code}`: {self.reason}" if self.code else self.reason


@dataclass(frozen=True)
class RankGroup:
    """Ranks that compile the same graphs: how many, the graph breaks, the inputs, the rank whose
    trace stands for them, and (for a group without rank 0) why it differs from rank 0."""

    ranks: tuple[int, ...]
    traced_rank: int
    graphs: int
    graph_breaks: tuple[RankBreak, ...]
    inputs: tuple[Any, ...]  # TensorSig
    why: tuple[str, ...] = ()

    def to_dict(self) -> dict:
        return {"ranks": list(self.ranks), "traced_rank": self.traced_rank, "graphs": self.graphs,
                "graph_breaks": [b.to_dict() for b in self.graph_breaks], "inputs": [t.to_dict() for t in self.inputs],
                "why": list(self.why)}


@dataclass(frozen=True)
class RanksReport:
    world_size: int
    traced: tuple[int, ...]
    reads_rank: tuple[int, ...]  # the script's lines that read the rank
    groups: tuple[RankGroup, ...]
    notes: tuple[str, ...]
    built: tuple[int, ...] = ()  # the ranks whose model and inputs graphtool built

    @property
    def same(self) -> bool:
        return len(self.groups) == 1

    def to_dict(self) -> dict:
        return {"same": self.same, "built": list(self.built), "traced": list(self.traced), "reads_rank_lines": list(self.reads_rank),
                "groups": [g.to_dict() for g in self.groups], "notes": list(self.notes)}


def capture_outcome(capture: Any) -> tuple[int, tuple[RankBreak, ...]]:
    """(graphs compiled, distinct graph breaks) of one rank's trace."""
    import linecache

    breaks = []
    for b in capture.breaks:
        code = linecache.getline(b.file, b.line).strip() if b.file and b.line else ""
        rb = RankBreak(b.file, b.line, b.reason, code or None)
        if rb not in breaks:
            breaks.append(rb)
    return len(capture.regions), tuple(breaks)


def build_ranks_report(world_size: int, signatures: list, outcomes: dict[int, tuple], guards: dict[int, Optional[str]],
                       reads_rank: tuple[int, ...] = (), built: tuple[int, ...] | None = None) -> RanksReport:
    """``outcomes``: traced rank -> :func:`capture_outcome`; ``guards``: traced rank -> the guard rank 0's
    compiled code fails on its inputs (:func:`~graphtool.capture.distributed.ranks.guard_failure`)."""
    traced = tuple(sorted(outcomes))
    stands_for = {r: _representative(r, signatures, traced, world_size) for r in range(world_size)}
    groups: dict[tuple, list[int]] = {}
    for r in range(world_size):
        rep = stands_for[r]
        groups.setdefault((outcomes[rep], signatures[rep].key), []).append(r)
    base = signatures[0]
    made = []
    for (outcome, _), ranks in groups.items():
        rep = next((r for r in ranks if r in traced), stands_for[ranks[0]])
        why = () if 0 in ranks else _why(ranks, signatures[rep], base, outcome, outcomes[0], guards.get(rep))
        made.append(RankGroup(tuple(ranks), rep, outcome[0], outcome[1], signatures[rep].inputs, why))
    built_ranks = tuple(range(world_size)) if built is None else tuple(built)
    notes = _notes(world_size, traced, reads_rank, made, built_ranks)
    return RanksReport(world_size, traced, tuple(reads_rank), tuple(made), tuple(notes), built_ranks)


def _representative(rank: int, signatures: list, traced: tuple[int, ...], world_size: int) -> int:
    if rank in traced:
        return rank
    key = signatures[rank].key
    same = [r for r in traced if signatures[r].key == key]
    if 1 in same and 0 < rank < world_size - 1:
        return 1
    return same[0] if same else 0


def _ranks_text(ranks) -> str:
    ranks = list(ranks)
    if len(ranks) == 1:
        return f"rank {ranks[0]}"
    if ranks == list(range(ranks[0], ranks[-1] + 1)) and len(ranks) > 2:
        return f"ranks {ranks[0]}-{ranks[-1]}"
    return "ranks " + ", ".join(str(r) for r in ranks)


def _shape(shape) -> str:
    return "x".join(str(d) for d in shape) or "a scalar"


def _why(ranks, sig, base, outcome, base_outcome, guard: Optional[str]) -> tuple[str, ...]:
    who = _ranks_text(ranks)
    owner = who + ("'s" if len(ranks) == 1 else "'")
    facts = []
    base_inputs = {t.name: t for t in base.inputs}
    for t in sig.inputs:
        b = base_inputs.get(t.name)
        if b is None:
            facts.append(f"{owner} input '{t.name}' ({_shape(t.shape)}) is not among rank 0's")
        elif b.shape != t.shape:
            facts.append(f"{owner} input '{t.name}' is {_shape(t.shape)} (rank 0's {_shape(b.shape)})")
        elif b.dtype != t.dtype:
            facts.append(f"{owner} input '{t.name}' is {t.dtype} (rank 0's {b.dtype})")
        elif b.requires_grad != t.requires_grad:
            facts.append(f"{owner} input '{t.name}' has requires_grad={t.requires_grad} (rank 0's {b.requires_grad})")
    if len(sig.inputs) != len(base.inputs):
        facts.append(f"{owner} step gets {len(sig.inputs)} tensor(s) (rank 0's {len(base.inputs)})")
    if sig.params != base.params:
        mine, theirs = dict(sig.params), dict(base.params)
        diff = next((n for n in list(mine) + list(theirs) if mine.get(n) != theirs.get(n)), None)
        facts.append(f"{owner} model has {len(mine)} parameters (rank 0's {len(theirs)}), first differing: {diff} "
                     f"{_shape(mine[diff]) if diff in mine else 'absent'} (rank 0's "
                     f"{_shape(theirs[diff]) if diff in theirs else 'absent'})")
    elif sig.modules != base.modules:
        facts.append(f"{owner} model has other modules ({len(sig.modules)}; rank 0's {len(base.modules)})")
    lines = []
    if facts:
        compiles = "it compiles its own graphs" if outcome[0] == base_outcome[0] else (
            f"it compiles {outcome[0]} graph(s) (rank 0: {base_outcome[0]})")
        line = "; ".join(facts) + f": {compiles}"
        if guard:
            line += f"; dynamo's guard: {guard}"
        lines.append(line)
    elif outcome[0] != base_outcome[0]:
        lines.append(f"{who} compile{'s' if len(ranks) == 1 else ''} {outcome[0]} graph(s) (rank 0: {base_outcome[0]})")
    mine_b, base_b = set(outcome[1]), set(base_outcome[1])
    for b in base_outcome[1]:
        if b not in mine_b:
            lines.append(f"rank 0 takes a graph break at {b.where} ({b.what}) that {who} do{'es' if len(ranks) == 1 else ''}n't")
    for b in outcome[1]:
        if b not in base_b:
            lines.append(f"{who} take{'s' if len(ranks) == 1 else ''} a graph break at {b.where} ({b.what}) that rank 0 doesn't")
    return tuple(lines)


def _notes(world_size: int, traced, reads_rank, groups, built) -> list[str]:
    notes = []
    if len(groups) == 1:
        if len(built) < world_size:
            notes.append(f"the script never reads its rank: rank 1's model and inputs, built, have rank 0's shapes, "
                         f"and {_ranks_text(range(2, world_size))} build the same" if world_size > 2 else
                         "the script never reads its rank: rank 1's model and inputs, built, have rank 0's shapes")
        else:
            notes.append(f"the {world_size} ranks' models and inputs were built, with the same shapes"
                         + (", and the ranks traced compiled the same graphs" if len(traced) > 1 else ""))
    others = [r for r in range(world_size) if r not in traced]
    if reads_rank:
        lines = ", ".join(str(n) for n in reads_rank)
        note = f"the script reads its rank (line{'s' if len(reads_rank) > 1 else ''} {lines}): traced {_ranks_text(traced)}"
        if others:
            note += f"; {_ranks_text(others)} not traced, taken to compile as a traced rank with the same shapes"
        notes.append(note)
    elif len(traced) > 1:
        notes.append(f"traced {_ranks_text(traced)} (one of each distinct set of shapes)")
    return notes
