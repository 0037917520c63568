"""Where the ranks of one run did not compile alike: the finding that explains a hang.

Under DDP or FSDP every rank must run the same collectives in the same order. A rank that compiles other graphs,
breaks where the others do not, or recompiles when they do not, runs its collectives in another order or at
another time: the others wait in an all-reduce it never joins. Compared here, rank by rank:

- graphs: the graphs each rank compiled, by content (the md5 torch logged for each ``dynamo_output_graph``);
- graph breaks: the sites (file, line, gb id) each rank broke at;
- recompiles: the frames each rank compiled again, and why (the guard, without torch's compile id).

A rank with several files (logs of several runs in one folder) is left out: which file is the run is unknown.
"""

from __future__ import annotations

import re
from collections import Counter

from graphtool.analysis.run_log.facts import Desync, ranks_text


def desyncs(per_file: dict, sites, recompiles, rank_of: dict, files) -> list[Desync]:
    owners: dict[int, list[int]] = {}
    for fi, f in enumerate(files):
        if f.rank is not None and f.records:
            owners.setdefault(f.rank, []).append(fi)
    ranks = {r: fis[0] for r, fis in owners.items() if len(fis) == 1}
    if len(ranks) < 2:
        return []
    out = []
    out.extend(_graphs(ranks, per_file))
    out.extend(_breaks(ranks, sites))
    out.extend(_recompiles(ranks, recompiles))
    return out


def _groups(values: dict) -> list[tuple[list[int], object]]:
    """Ranks grouped by equal value, the largest group first."""
    groups: list[tuple[list[int], object]] = []
    for rank in sorted(values):
        for members, v in groups:
            if v == values[rank]:
                members.append(rank)
                break
        else:
            groups.append(([rank], values[rank]))
    groups.sort(key=lambda g: (-len(g[0]), g[0][0]))
    return groups


def _graphs(ranks: dict, per_file: dict) -> list[Desync]:
    made = {r: [c for c in per_file.get(fi, []) if c.graphs] for r, fi in ranks.items()}
    sigs = {r: Counter(s for c in cs for s in c.signature) for r, cs in made.items()}
    groups = _groups(sigs)
    if len(groups) == 1:
        return []
    counts = {r: sum(c.graphs for c in cs) for r, cs in made.items()}
    everyone = set.intersection(*(set(s) for s in sigs.values()))
    detail = {}
    for r, cs in made.items():
        own = [f"{c.function or '?'} ({c.compile_id})" for c in cs if any(s not in everyone for s in c.signature)]
        text = f"{counts[r]} graph{'s' if counts[r] != 1 else ''}"
        detail[str(r)] = text + (f"; not compiled by every rank: {', '.join(own)}" if own else "")
    parts = [f"{ranks_text(members)} compiled {counts[members[0]]} graph{'s' if counts[members[0]] != 1 else ''}"
             for members, _ in groups]
    if len({counts[m[0]] for m, _ in groups}) == 1:
        message = f"ranks compiled different graphs ({'; '.join(parts)}, not the same ones)"
    else:
        message = f"ranks compiled different graphs: {'; '.join(parts)}"
    return [Desync("graphs", message, detail)]


def _breaks(ranks: dict, sites) -> list[Desync]:
    out = []
    for s in sites:
        on = [r for r in ranks if r in s.ranks]
        off = [r for r in ranks if r not in s.ranks]
        if not on or not off:
            continue
        where = f"{s.file}:{s.line}" if s.file else "an unknown site"
        gb = f" [{s.gb_id}]" if s.gb_id else ""
        message = f"{ranks_text(on)} break{'s' if len(on) == 1 else ''} at {where}{gb} ({s.reason}); {ranks_text(off)} do{'es' if len(off) == 1 else ''} not"
        detail = {str(r): ("breaks here" if r in on else "does not break here") for r in sorted(ranks)}
        out.append(Desync("graph_breaks", message, detail))
    return out


_CID = re.compile(r"^\s*\d+/\d+:\s*")


def _recompiles(ranks: dict, recompiles) -> list[Desync]:
    per = {r: Counter((x.frame, _CID.sub("", x.reason)) for x in recompiles if x.rank == r) for r in ranks}
    groups = _groups(per)
    if len(groups) == 1:
        return []
    detail = {}
    for r, c in per.items():
        n = sum(c.values())
        what = ", ".join(f"{frame} ({why})" + (f" x{k}" if k > 1 else "") for (frame, why), k in sorted(c.items(), key=str))
        detail[str(r)] = f"{n} recompile{'s' if n != 1 else ''}" + (f": {what}" if what else "")
    parts = [f"{ranks_text(m)}: {sum(v.values())}" for m, v in groups]
    return [Desync("recompiles", f"ranks recompiled differently (recompiles {'; '.join(parts)})", detail)]
