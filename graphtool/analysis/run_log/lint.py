"""A run's logs as one lint result: ``graphtool lint --log DIR`` judges a real run's breaks and recompiles with lint's
budgets, baseline, exit codes and formats, exactly as it judges a model it ran itself.

Breaks are the log's sites (file, line, gb id; ``occurrences`` the break records, every rank together), in the user's
code where torch broke in a library (the library place kept, as lint keeps it); recompiles and skipped frames one
per compile; a frame past ``recompile_limit`` fails lint whatever the budget, as ``lint --schedule`` does.
"""

from __future__ import annotations

from graphtool.analysis.diagnostics import read_line
from graphtool.analysis.run_log.facts import RunLog
from graphtool.capture.processes.lint_job import BreakRecord, FrameRecord, LintResult


def as_lint_result(facts: RunLog) -> LintResult:
    """``facts`` as the :class:`LintResult` a lint child would have made of the same run.

    >>> import io
    >>> from graphtool.analysis.run_log.build import read_run_log
    >>> from tests.log.handmade import small_log
    >>> r = as_lint_result(read_run_log([("x.log", io.BytesIO(small_log()))]))
    >>> r.graph_count, [(b.file, b.line, b.code, b.occurrences) for b in r.breaks], [f.function for f in r.recompiles]
    (3, [('/app/model.py', 13, 'gb0059', 1)], ['forward'])
    """
    breaks = []
    for b in facts.graph_breaks:
        file, line, lib_file, lib_line = b.file, b.line, None, None
        if b.user_file:  # torch broke in library code: the user's call is the site, the library place kept
            file, line, lib_file, lib_line = b.user_file, b.user_line, b.file, b.line
        text = read_line(file, line) if file and line else None
        breaks.append(BreakRecord(b.reason, b.gb_id, file, line, text.strip() if text else None, b.hint, b.count,
                                  library_file=lib_file, library_line=lib_line))
    recompiles = tuple(FrameRecord(r.frame, r.file, r.line, r.reason) for r in facts.recompiles)
    skipped = tuple(FrameRecord(s.frame, s.file, s.line, s.reason) for s in facts.skipped_frames)
    limit = facts.recompile_limit[0] if facts.recompile_limit else None
    limit_hit = f"{limit.frame or '?'} at {limit.file}:{limit.line}, compile {limit.compile_id}" if limit else None
    no_graph = None if facts.graphs_compiled else "the log records no compiled graph"
    return LintResult(ok=True, graph_count=facts.graphs_compiled, breaks=tuple(breaks), recompiles=recompiles,
                      skipped_frames=skipped, seconds=facts.compile_time.seconds, no_graph=no_graph, limit_hit=limit_hit)
