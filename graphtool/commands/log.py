"""``graphtool log``: a real run's TORCH_TRACE logs, every rank, read after the run (torch is never imported).

Reads a ``TORCH_TRACE`` folder, ``.log`` files or ``.log.gz`` files (:mod:`graphtool.capture.torch_trace`), and
says what the run compiled (:mod:`graphtool.analysis.run_log`): graphs, breaks by site, recompiles, compile time
by frame and phase, CUDA-graph skips, and where ranks did not compile alike. ``against=script`` puts each fact
beside graphtool's prediction for the same script (that part imports torch: it traces the script).

Example::

    >>> from tests.log.recorded import LOOP_213
    >>> r = log([LOOP_213])
    >>> r.facts.graphs_compiled, [(b.line, b.gb_id, b.count) for b in r.facts.graph_breaks]
    (6, [(54, 'gb0059', 2)])
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Optional

from graphtool.commands.progress import SILENT, Progress
from graphtool.commands.result import Result
from graphtool.render.pictures import LAYOUT_TIMEOUT

if TYPE_CHECKING:
    from graphtool.render.pictures import Level


@dataclass(frozen=True)
class LogPicture:
    """One AOT graph of one compile, laid out for the page (the viewer ``report`` uses)."""

    rank: Optional[int]
    compile_id: str
    graph: str  # forward | backward | inference
    nodes: int
    edges: int
    levels: tuple[Level, ...]
    default: int
    facts: dict

    @property
    def label(self) -> str:
        who = f"rank {self.rank} " if self.rank is not None else ""
        return f"{who}{self.compile_id} {self.graph}"


@dataclass(frozen=True, repr=False)
class LogResult(Result):
    """What a run's logs say (:class:`~graphtool.analysis.run_log.facts.RunLog`), and, with ``against``, beside what
    graphtool predicted (:class:`~graphtool.analysis.run_log.against.Comparison`)."""

    command = "log"

    facts: Any  # RunLog
    paths: tuple[str, ...]
    against: Any = None  # Comparison
    pictures: tuple[LogPicture, ...] = ()
    notes: tuple[str, ...] = ()

    @property
    def report(self):
        return self.facts

    @property
    def title(self) -> str:
        from graphtool.display_paths import display_path

        return ", ".join(display_path(p) or p for p in self.paths)

    @property
    def found(self) -> bool:
        f = self.facts
        return bool(f.graph_breaks or f.recompiles or f.desync or f.skipped_frames or f.recompile_limit)

    def to_dict(self) -> dict:
        from graphtool.schema import stamped

        d = self.facts.to_dict()
        d["paths"] = list(self.paths)
        d["against"] = self.against.to_dict() if self.against is not None else None
        d["notes"] = list(self.facts.notes) + list(self.notes)
        return stamped(self.command, d, torch_version=self.facts.log.torch_version)  # the run's torch

    def summary(self) -> str:
        from graphtool.render.log import summary_line

        return summary_line(self.facts)

    def view(self):
        from graphtool.render.log import log_view

        return log_view(self)

    def diagnostics(self) -> str:
        from graphtool.render.diagnostics import format_diagnostics
        from graphtool.render.log import diagnostics

        return format_diagnostics([d for d, _ in diagnostics(self.facts)])

    def sections(self) -> list[str]:
        from graphtool.render.log import log_sections

        return log_sections(self)

    def html(self) -> str:
        from graphtool.render.log import format_log_page

        return format_log_page(self)


def log(paths: Sequence[str], *, against: Optional[str] = None, entry: Optional[str] = None, pictures: bool = False,
        progress: Progress = SILENT, layout_timeout: float = LAYOUT_TIMEOUT) -> LogResult:
    """Read the logs at ``paths`` (folders, ``.log``, ``.log.gz``); ``pictures`` lays out each compile's AOT graphs
    (for the page); ``against`` (a script, ``entry`` its factory) adds graphtool's prediction beside each fact.

    A path that does not exist, a folder with no log, or logs without one structured-trace record stop with exit 2."""
    from graphtool.analysis.run_log import read_logs

    facts = read_logs(paths, pictures=pictures,
                      on_files=lambda n: progress.phase(f"reading {n} log file{'s' if n != 1 else ''}..."))
    notes: list[str] = []
    drawn: tuple[LogPicture, ...] = ()
    if pictures:
        drawn, layout_notes = _pictures(facts, progress, layout_timeout)
        notes += layout_notes
    comparison = None
    if against is not None:
        from graphtool.analysis.run_log.against import compare

        comparison = compare(facts, predict(against, entry=entry, progress=progress))
    return LogResult(facts, tuple(str(p) for p in paths), comparison, drawn, tuple(notes))


def predict(script: str, *, entry: Optional[str] = None, progress: Progress = SILENT):
    """graphtool's prediction for ``script``, as :class:`~graphtool.analysis.run_log.against.Prediction`: the one
    place ``--against`` asks graphtool's own commands; the rest reads plain values.

    One Session on the script, asked what ``graphtool trace SCRIPT`` and ``graphtool cudagraphs SCRIPT`` print: the
    trace (graphs, breaks), and the CUDA-graph verdict (the stand-in, reduce-overhead) with its steady state, whose
    steps give the recompiles; the same answers, from the same load, as those commands'."""
    from graphtool.analysis.run_log.against import prediction_from
    from graphtool.commands.session import Session

    with Session(script, entry=entry, progress=progress) as s:
        return prediction_from(script, s.trace().report, s.cudagraphs().report)


# -- pictures ------------------------------------------------------------------------------------------------------


def _pictures(facts, progress: Progress, timeout: float) -> tuple[tuple[LogPicture, ...], list[str]]:
    from graphtool.analysis.run_log.graph_code import code_drawing, code_facts, parse_graph_code
    from graphtool.render.pictures import Layout

    out, notes = [], []
    lay_out = Layout(timeout)
    for g in facts.graph_code:
        kind = "forward" if g.kind == "inference" else g.kind
        parsed = parse_graph_code(g.code, backward=kind == "backward")
        if not parsed.nodes:
            notes.append(f"{g.compile_id} {g.kind}: the logged code could not be read as a graph")
            continue
        drawing = code_drawing(parsed, kind)
        what = f"{g.compile_id} {g.kind}" + (f" (rank {g.rank})" if g.rank is not None else "")
        progress.phase(f"laying out {what} ({len(drawing.nodes)} nodes)...")
        levels = [lv for lv in (lay_out(shown, name, depth, members, what) for name, depth, shown, members in
                                _level_drawings(drawing)) if lv is not None]
        if lay_out.missing:
            break
        if not levels:
            continue
        default = len(levels) - 1 if levels[-1].depth is None and len(drawing.nodes) <= 120 else 0
        out.append(LogPicture(g.rank, g.compile_id, g.kind, len(parsed.nodes), len(drawing.edges), tuple(levels),
                              default, code_facts(parsed)))
    return tuple(out), notes + lay_out.notes


def _level_drawings(drawing):
    """(name, depth, drawing, members) per level: folded by the user's source line when large, then every node."""
    from graphtool.analysis.drawing import COLLAPSE_THRESHOLD
    from graphtool.analysis.node_facts import fold_level
    from graphtool.render.pictures import FULL_LIMIT

    levels = []
    size = sum(1 for n in drawing.nodes if n.kind != "output")
    if size > COLLAPSE_THRESHOLD and any(n.module for n in drawing.nodes):
        folded, members = fold_level(drawing, 1)
        levels.append(("by source line", 1, folded, members))
    if len(drawing.nodes) <= FULL_LIMIT:
        levels.append(("every node", None, drawing, {}))
    return levels
