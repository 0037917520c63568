"""The ``--ddp`` view: the graphs DDP's optimizer splits off, one line each, then the other caps.

Readable at 80 columns::

    under DDP (8 ranks, bucket_cap_mb=25): 2 graphs from 1 dynamo graph
      region 0: bucket 0, 14 params, 7.0 MB, module 0 at m.py:12
      region 1: bucket 1, 2 params, 1.0 MB, module 7 at m.py:12
      graphs at bucket_cap_mb 1: 8, 5: 3, 10: 2, 25: 2, 50: 2, 100: 2
      note: ...
"""

from __future__ import annotations

import textwrap

from rich.console import Group
from rich.text import Text

from graphtool.display_paths import display_path
from graphtool.render.tables import wrapped

_MB = 1024 * 1024


def split_verdict_line(v: dict) -> str:
    """``applied (forward, backward)`` or ``skipped: cpu-node (forward)``, ``2 of 3 partitions``."""
    if v["cudagraphed"]:
        return f"applied ({', '.join(v['graphs']) or 'no graph'})"
    if v["skips"]:
        return "skipped: " + ", ".join(f"{s['code']} ({s['graph']})" if s.get("graph") else s["code"] for s in v["skips"])
    return f"partly: {v['partitions_cudagraphed']} of {v['partitions']} partitions CUDA-graphed"


def ddp_view(report, width: int = 78) -> Group:
    """One line per split graph (its user line apart when the line would pass ``width``), the graph
    count at other caps, then the notes wrapped at ``width``."""
    lines = [Text(
        f"{'under DDP' if report.wrapper.startswith('DDP') else report.wrapper} ({report.world_size} rank{'s' if report.world_size != 1 else ''}, "
        f"bucket_cap_mb={report.bucket_cap_mb:g}): {report.graph_count} graph{'s' if report.graph_count != 1 else ''} "
        f"from {report.dynamo_graphs} dynamo graph{'s' if report.dynamo_graphs != 1 else ''}",
        style="bold",
    )]
    for g in report.graphs:
        line = f"  region {g.region}: bucket {g.bucket}, {len(g.params)} params, {g.bytes / _MB:.1f} MB"
        if g.module:
            line += f", module {g.module}"
        where = f"{display_path(g.source.file)}:{g.source.line}" if g.source else ""
        if where and len(line) + len(where) + 4 <= width:
            line, where = f"{line} at {where}", ""
        lines.append(Text(line))
        if where:
            lines.append(Text(f"    at {where}"))
        if g.cudagraphs is not None:
            lines.append(Text(f"    CUDA graphs: {split_verdict_line(g.cudagraphs)}",
                              style="verdict.ok" if g.cudagraphs["cudagraphed"] else "verdict.bad"))
    if report.graphs_at:
        caps = ", ".join(f"{cap:g}: {n}" for cap, n in report.graphs_at)
        lines.append(Text(f"  graphs at bucket_cap_mb {caps}"))
    for c in report.collectives:
        size = f", {c.bytes} bytes" if c.bytes is not None else ""
        ranks = f" of {c.group_size} ranks" if c.group_size is not None else ""
        lines.extend(Text(w) for w in textwrap.wrap(f"region {c.region} {c.graph}: {c.op} (group {c.group}{ranks}{size})",
                                                    width=width, initial_indent="  ", subsequent_indent="    "))
    if report.unused is not None:
        u = report.unused
        names = ", ".join(u["parameters"][:4]) + (f" and {len(u['parameters']) - 4} more" if len(u["parameters"]) > 4 else "")
        where = f" (set at {display_path(u['source']['file'])}:{u['source']['line']})" if u.get("source") else ""
        if u.get("fails_at_step"):
            error = u["error"] or ""
            cut = error.find(". ", error.find("RuntimeError"))
            head = f"UNUSED PARAMETERS: {names} got no gradient{where}; {error[:cut + 1] if cut > 0 else error}"
            style = "verdict.bad"
        else:
            head = (f"unused parameters: {names} got no gradient{where}; find_unused_parameters=True "
                    "lets the loop go on")
            style = "verdict"
        lines.extend(Text(w, style=style) for w in textwrap.wrap(head, width=width, initial_indent="  ",
                                                                  subsequent_indent="    "))
        lines.extend(Text(w, style="dim") for w in textwrap.wrap(u["fix"], width=width, initial_indent="  fix: ",
                                                                 subsequent_indent="       "))
    for note in report.notes:
        lines.extend(wrapped(note, width, "  note: ", "        ", "dim"))
    if getattr(report, "ranks", None) is not None:
        from graphtool.render.ranks import ranks_lines

        lines.extend(ranks_lines(report.ranks, width))
    return Group(*lines)


def _size(n) -> str:
    """Bytes for a person: ``126.7 KiB``; exact below 1 KiB."""
    if n is None:
        return "-"
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} B"


def fsdp2_view(report, width: int = 78) -> Group:
    """The ``--fsdp2`` view: FSDP units, graphs and breaks, collectives (in graphs, then eager per
    unit), one row of memory per rank, then which facts are predicted only and the notes.

    Every line fits ``width``; a user line that would not fit goes on its own line."""
    from graphtool.text import count

    ranks = count(report.world_size, "rank")
    lines = [Text(f"under FSDP2 ({ranks}): {count(report.graph_count, 'compiled graph')}, "
                  f"{count(len(report.breaks), 'graph break')}", style="bold")]
    lines.extend(Text(w) for w in textwrap.wrap(f"applied: {report.wrapper}", width=width, initial_indent="  ",
                                                subsequent_indent="    "))
    lines.append(Text(f"  {'FSDP unit':<16} {'params':>6} {'full':>11} {'shard/rank':>11} {'all-gather':>11}"))
    for u in report.units:
        name = u.module or "(root)"
        lines.append(Text(f"  {_clip(name, 16):<16} {u.params:>6} {_size(u.full_bytes):>11} {_size(u.shard_bytes):>11} "
                          f"{_size(u.allgather_bytes):>11}"))
    for b in report.breaks:
        what = "frame skipped" if b.skips_frame else "graph break"
        lines.extend(Text(w) for w in textwrap.wrap(f"{what}: {b.reason}", width=width, initial_indent="  ",
                                                    subsequent_indent="    "))
        for label, src in (("at", b.user_source), ("torch", b.torch_source)):
            if src is not None:
                shown = display_path(src.file)
                shown = shown.split("site-packages/", 1)[-1]
                lines.append(Text(_clip(f"    {label} {shown}:{src.line}", width)))
    for g in report.graphs or ():  # cudagraphs --fsdp2: each compiled graph runs once per block it serves
        runs = f" ({g.runs_per_step}x per step)" if g.runs_per_step else ""
        style = "verdict.ok" if g.cudagraphs["cudagraphed"] else "verdict.bad"
        lines.extend(Text(w, style=style) for w in textwrap.wrap(
            f"graph {g.region}{runs}: CUDA graphs {split_verdict_line(g.cudagraphs)}", width=width,
            initial_indent="  ", subsequent_indent="    "))
    if report.collectives:
        for c in report.collectives:
            size = f", {_size(c.bytes)}" if c.bytes is not None else ""
            ranks = f" of {c.group_size} ranks" if c.group_size is not None else ""
            lines.extend(Text(w) for w in textwrap.wrap(f"in graph {c.region} {c.graph}: {c.op} (group {c.group}{ranks}{size})",
                                                        width=width, initial_indent="  ", subsequent_indent="    "))
    else:
        lines.append(Text("  collectives in compiled graphs: none"))
    if report.eager:
        lines.append(Text("  eager collectives per step, each rank (FSDP2's hooks):"))
        for e in report.eager:
            lines.append(Text(_clip(f"    {e.unit or '(root)':<12} {e.op:<15} x{e.count}  sends {_size(e.sent_bytes)}, "
                                    f"receives {_size(e.received_bytes)}", width)))
    opt = f" (optimizer: {report.optimizer})" if report.optimizer else ""
    lines.append(Text(f"  memory per rank{opt}:"))
    lines.append(Text(f"    {'rank':>4} {'params':>10} {'grads':>10} {'optimizer':>10} {'unsharded':>10} "
                      f"{'all-gather*':>11} {'total':>10}"))
    for m in report.memory:
        lines.append(Text(f"    {m.rank:>4} {_size(m.params):>10} {_size(m.grads):>10} {_size(m.optimizer):>10} "
                          f"{_size(m.unsharded_peak):>10} {_size(m.allgather_peak):>11} {_size(m.total):>10}"))
    lines.extend(Text(w, style="dim") for w in textwrap.wrap(
        "params include FSDP2's padding; unsharded: the root's and the largest block's parameters gathered at "
        "once; all-gather*: that and the next block's all-gather buffer (prefetch; see below); total counts "
        "all-gather*", width=width, initial_indent="    ", subsequent_indent="    "))
    same = "yes" if report.same_graphs_on_every_rank else "not predicted (see notes)"
    lines.append(Text(f"  same graphs on every rank: {same}"))
    for fact in report.predicted_only:
        lines.extend(Text(w, style="dim") for w in textwrap.wrap(fact, width=width, initial_indent="  predicted only: ",
                                                                 subsequent_indent="    "))
    for note in report.notes:
        lines.extend(wrapped(note, width, "  note: ", "        ", "dim"))
    return Group(*lines)


def _clip(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"
