"""A real run's facts beside graphtool's prediction for the same script: every run becomes a check of the prediction.

Compared: the graphs the run's first call compiled against the regions graphtool traced (one call, the script's
example inputs), every graph-break site, recompiles, and CUDA-graph skips. Each disagreement names its likely
cause, from what the two sides say:

- a value the stand-in could not know: a break or a graph only the run has, at a data-dependent branch
  (``.item()``, ``if x.sum() > 0``) or taken by some ranks only;
- shapes the run saw: recompiles on a size guard (graphtool traced one call; ``graphtool shapes`` predicts a loop);
- a torch version difference: the run's torch is not the one graphtool ran;
- what a log cannot hold: CUDA-graph skips on a CPU run, or a run that did not ask for CUDA graphs.
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass

from graphtool.analysis.run_log.facts import RunLog, ranks_text


@dataclass(frozen=True)
class Prediction:
    """What graphtool predicted for a script, as plain values (made by the commands layer from its own reports)."""

    script: str
    torch_version: str
    graphs: int  # regions compiled by one call
    breaks: tuple[tuple, ...]  # (file, line, gb_id, reason)
    skipped_frames: int = 0
    recompiles: int = 0  # over the steps graphtool ran (one call, and the steady state's repeats)
    cudagraph_skips: tuple[str, ...] = ()  # the verdict's reasons to skip (inductor, reduce-overhead)
    cudagraph_backend: str = "inductor"

    def to_dict(self) -> dict:
        d = asdict(self)
        d["breaks"] = [{"file": f, "line": ln, "gb_id": gb, "reason": r} for f, ln, gb, r in self.breaks]
        d["cudagraph_skips"] = list(self.cudagraph_skips)
        return d


@dataclass(frozen=True)
class Row:
    fact: str  # graphs | graph break | recompiles | cudagraph skips
    what: str  # the site, or "" for a count
    predicted: str
    seen: str
    agree: bool
    cause: str | None = None

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class Comparison:
    prediction: Prediction
    rows: tuple[Row, ...]

    @property
    def disagreements(self) -> int:
        return sum(1 for r in self.rows if not r.agree)

    def to_dict(self) -> dict:
        return {"prediction": self.prediction.to_dict(), "rows": [r.to_dict() for r in self.rows],
                "disagreements": self.disagreements}


def prediction_from(script: str, report, verdict) -> Prediction:
    """A :class:`Prediction` from graphtool's own reports of ``script``: its
    :class:`~graphtool.analysis.trace_report.TraceReport` (``graphtool trace``'s) and the CUDA-graph
    :class:`~graphtool.analysis.cudagraphs.verdict.Verdict` with its steady state (``graphtool cudagraphs``'), whose
    steps give the recompiles (``graphtool.commands.log.predict`` asks a Session for both; ``graphtool report --log``
    has them already)."""
    skips = tuple(dict.fromkeys(r.message for r in verdict.reasons if r.skips))
    recompiles = verdict.steady.recompiles if verdict.steady is not None else 0
    breaks = tuple((b.file, b.line, b.code, b.reason) for b in report.breaks)
    return Prediction(script, report.torch_version, len(report.regions), breaks, len(report.skipped_frames), recompiles,
                      skips, verdict.backend)


def _same_file(a: str | None, b: str | None) -> bool:
    """Two paths name one file: equal, or the same last parts (a run on another machine has another root)."""
    if not a or not b:
        return a == b
    if os.path.normpath(a) == os.path.normpath(b):
        return True
    pa, pb = a.replace("\\", "/").split("/"), b.replace("\\", "/").split("/")
    n = min(len(pa), len(pb), 2)
    return pa[-n:] == pb[-n:]


def _version_note(facts: RunLog, pred: Prediction) -> str | None:
    run = (facts.log.torch_version or "").split("+")[0]
    ours = pred.torch_version.split("+")[0]
    if run and ours and run != ours:
        return f"a torch version difference (the run: {run}, graphtool: {ours})"
    return None


def compare(facts: RunLog, pred: Prediction) -> Comparison:
    """The rows of the comparison, one per fact, disagreements marked with a likely cause."""
    version = _version_note(facts, pred)
    rows = [_graphs(facts, pred, version)]
    rows += _breaks(facts, pred, version)
    rows.append(_recompiles(facts, pred))
    rows.append(_cudagraphs(facts, pred))
    return Comparison(pred, tuple(rows))


def _first_call_graphs(facts: RunLog) -> dict:
    """Per rank: graphs of each frame's first compile (what the first call compiled; recompiles are later calls')."""
    out: dict = {}
    for c in facts.compiles:
        if c.frame_compile_id == 0:
            out[c.rank] = out.get(c.rank, 0) + c.graphs
    return out


def _graphs(facts: RunLog, pred: Prediction, version: str | None) -> Row:
    per_rank = _first_call_graphs(facts) or {None: 0}
    values = sorted(set(per_rank.values()))
    seen = " or ".join(map(str, values)) + (" (ranks differ)" if len(values) > 1 else "")
    agree = values == [pred.graphs]
    cause = None
    if not agree:
        extra_sites = [b for b in facts.graph_breaks if not any(_same_file(b.file, f) and b.line == ln for f, ln, _, _ in pred.breaks)]
        if len(values) > 1:
            cause = "ranks took different paths (a rank-dependent branch): see the desync"
        elif extra_sites:
            cause = "the run broke where graphtool's trace did not (a value the stand-in could not know, or another code path)"
        elif version:
            cause = version
        else:
            frames = ", ".join(dict.fromkeys(c.function or "?" for c in facts.compiles if c.frame_compile_id == 0 and c.graphs))
            cause = (f"the run compiled other code than the script's example calls (its frames: {frames}): another "
                     "entry point, more functions under torch.compile, or wrappers such as DDP")
    return Row("graphs", "first call", str(pred.graphs), seen, agree, cause)


def _breaks(facts: RunLog, pred: Prediction, version: str | None) -> list[Row]:
    rows = []
    matched = set()
    ranks_seen = {r.rank for r in facts.ranks}
    for b in facts.graph_breaks:
        hit = next((i for i, (f, ln, gb, _) in enumerate(pred.breaks) if _same_file(b.file, f) and b.line == ln), None)
        where = f"{b.file}:{b.line}" if b.file else "an unknown site"
        seen = f"{b.count}x" + (f", {ranks_text(b.ranks)}" if facts.distributed else "")
        if hit is not None:
            matched.add(hit)
            rows.append(Row("graph break", where, "yes", seen, True))
            continue
        if b.damaged:
            cause = "the log's record is damaged: where it broke is unknown"
        elif facts.distributed and set(b.ranks) != ranks_seen:
            cause = f"only {ranks_text(b.ranks)} took this path: a rank-dependent branch graphtool's one process did not take"
        else:
            cause = ("a value the stand-in could not know (real data in a branch), or a code path the example inputs "
                     "do not take")
            if version:
                cause += f"; or {version}"
        rows.append(Row("graph break", where, "no", seen, False, cause))
    for i, (f, ln, _gb, _r) in enumerate(pred.breaks):
        if i in matched:
            continue
        cause = "the run did not reach this line (another path, or other inputs)"
        if version:
            cause += f", or {version}"
        rows.append(Row("graph break", f"{f}:{ln}", "yes", "no", False, cause))
    return rows


def _recompiles(facts: RunLog, pred: Prediction) -> Row:
    n = len(facts.recompiles)
    agree = n == pred.recompiles
    cause = None
    if not agree:
        kinds = " ".join(r.reason for r in facts.recompiles)
        if n > pred.recompiles and ("size mismatch" in kinds or "stride mismatch" in kinds or ".size()" in kinds):
            cause = ("shapes the run saw: graphtool traced the example inputs; give the script get_input_schedule() "
                     "and `graphtool shapes` predicts the loop's recompiles")
        elif n > pred.recompiles:
            cause = "values that changed between the run's calls (see each recompile's guard)"
        else:
            cause = "the run called the model fewer times, or with one size throughout"
    limit = f", {len(facts.recompile_limit)} past recompile_limit" if facts.recompile_limit else ""
    return Row("recompiles", "", str(pred.recompiles), f"{n}{limit}", agree, cause)


def _cudagraphs(facts: RunLog, pred: Prediction) -> Row:
    seen = sorted({s.reason for s in facts.cudagraph_skips})
    predicted = list(pred.cudagraph_skips)
    agree = bool(seen) == bool(predicted)
    cause = None
    text_seen = "; ".join(seen) if seen else "none logged"
    if not agree:
        if predicted and not seen:
            cause = ("what a log cannot hold: cudagraph_skip_reason is written only when the run asks for CUDA graphs "
                     "(mode=\"reduce-overhead\") on a GPU; a CPU run or the default mode logs none")
        else:
            cause = "a skip graphtool's stand-in did not see (a value or device only the run had)"
    pred_text = "; ".join(predicted) if predicted else "none"
    return Row("cudagraph skips", f"backend {pred.cudagraph_backend}", pred_text, text_seen, agree, cause)
