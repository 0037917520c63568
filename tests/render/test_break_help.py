"""One help per graph break, whichever command shows it (issue 44, item 5): ``cudagraphs`` said "remove the break to
get one graph" for ``loss.backward()``, for a line of torch's own ``optimizer.py`` and for ``opt.zero_grad()``, while
``trace`` gave torch's hints for the same breaks. The breaks of examples/train_step.py as torch 2.13 records them,
through every view: trace's diagnostics and JSON, the CUDA-graph verdict, lint's diagnostics, JSON and SARIF, the
report page's findings. No compile: the records are written by hand (tests/analysis/test_train_step_gpu_agreement.py
checks the verdict's fixes on a real trace of a compiled step, on every torch)."""

from __future__ import annotations

import pytest

from tests.helpers import example

STEP = str(example("train_step.py"))  # 15: loss.backward()  16: opt.step()  17: opt.zero_grad(set_to_none=True)


#: where torch 2.13's optimizer breaks (``_use_grad``'s ``torch._dynamo.graph_break()``), as a venv installs it
OPTIMIZER_PY = "/venv/lib/python3.11/site-packages/torch/optim/optimizer.py"


#: (reason, code, torch's hint, file, line, the user's call that led there, the help's first words)
BREAKS = [
    ("Unsupported Tensor.backward() call", "gb0123", "Set torch._dynamo.trace_autograd_ops=True", STEP, 15, None,
     "dynamo ends the graph at backward() inside a compiled function"),
    ("Call to `torch._dynamo.graph_break()`", "gb0025", "Remove the `torch._dynamo.graph_break()` call.", "OPTIMIZER", 79,
     (STEP, 16), "torch's optimizer breaks the graph on purpose around its step"),
    ("Attempted to inline function marked as skipped", "gb0008", "Avoid calling the function `Optimizer.zero_grad`.", STEP, 17,
     None, "dynamo never traces Optimizer.zero_grad"),
]


def _infos():
    """Each break where trace and lint both place it: the user's line, torch's place in library code as the library's."""
    from graphtool.analysis.trace_report import BreakInfo

    out = []
    for reason, code, hint, file, line, called, _ in BREAKS:
        file = OPTIMIZER_PY if file == "OPTIMIZER" else file
        at = called or (file, line)
        out.append(BreakInfo(reason, code, *at, hint=hint, library_file=file if called else None,
                             library_line=line if called else None))
    return out


def _trace_helps() -> list[str]:
    from dataclasses import replace

    from tests.render.test_views import TRACE

    return [d.help for d in replace(TRACE, breaks=tuple(_infos()), skipped_frames=()).diagnostics()]


def _verdict_fixes() -> list[str]:
    from graphtool.analysis.cudagraphs.verdict import _break_reasons

    return [r.fix for r in _break_reasons(_infos())]


def _lint_model():
    from graphtool.analysis.diagnostics import read_line
    from graphtool.analysis.lint import LintResult, LintTarget, judge
    from graphtool.capture.processes.lint_job import BreakRecord

    records = []
    for b in _infos():  # as lint's child records them: at the user's line, torch's place as the library's
        records.append(BreakRecord(b.reason, b.code, b.file, b.line, (read_line(b.file, b.line) or "").strip(),
                                   b.hint, library_file=b.library_file, library_line=b.library_line))
    return judge(LintTarget(STEP), LintResult(ok=True, graph_count=2, breaks=tuple(records)))


def _lint_helps() -> list[str]:
    from graphtool.analysis.lint import LintReport
    from graphtool.render.lint import lint_diagnostics

    return [d.help for d in lint_diagnostics(LintReport((_lint_model(),), None)) if d.code == "GT-B001"]


def _finding_fixes() -> list[str]:
    from dataclasses import replace

    from graphtool.analysis.findings import NodeIndex, build_findings
    from graphtool.capture.graph_breaks import GraphBreak, StackFrame
    from tests.render.test_views import TRACE

    raw = [GraphBreak(b.library_file or b.file, b.library_line or b.line, b.reason, b.code, b.hint,  # as torch records them
                      stack=(StackFrame(b.file, b.line, "train_step"), StackFrame(b.library_file, b.library_line, "_use_grad"))
                      if b.library_file else ())
           for b in _infos()]
    trace = replace(TRACE, breaks=tuple(_infos()), mutations=replace(TRACE.mutations, inputs=(), outputs=(), input_aliases=()))
    return [f.fix for f in build_findings(trace, raw, None, None, NodeIndex({})) if f.kind == "graph-break"]


@pytest.mark.parametrize("view", [_trace_helps, _verdict_fixes, _lint_helps, _finding_fixes],
                         ids=["trace", "cudagraphs", "lint", "report"])
def test_every_view_gives_the_help_that_fits_the_cause(view):
    helps = view()
    assert [h.split(" (")[0].split(":")[0].split(";")[0][:40] for h in helps] == [b[-1][:40] for b in BREAKS]
    assert not any("remove the break to get one graph" in h for h in helps)


def test_the_views_agree_word_for_word_and_json_carries_it():
    trace = _trace_helps()
    assert _verdict_fixes() == trace and _lint_helps() == trace and _finding_fixes() == trace
    assert [b.to_dict()["help"] for b in _infos()] == trace  # trace --format json
    assert [b.to_dict()["help"] for b in _lint_model().breaks] == trace  # lint --format json
    backward, optimizer, zero_grad = trace
    assert "compiled autograd (torch._dynamo.config.compiled_autograd = True)" in backward
    assert "torch.compile(model)" in backward  # or the forward alone
    assert "torch.compile(opt.step)" in optimizer and "nothing to remove" in optimizer
    assert "torch.compile(opt.step)" in zero_grad and "opt.zero_grad(set_to_none=True) outside" in zero_grad


def test_sarif_says_the_same_help():
    import json

    from graphtool.analysis.lint import LintReport
    from graphtool.render.lint import format_sarif

    doc = json.loads(format_sarif(LintReport((_lint_model(),), None)))
    texts = [r["message"]["text"] for r in doc["runs"][0]["results"]]
    assert all(f"Hint: {h}" in t for t, h in zip(texts, _trace_helps()))


def test_a_host_sync_and_a_plain_break_keep_their_own_help():
    from graphtool.analysis.diagnostics import break_help

    item = break_help("Unsupported Tensor.item() call with capture_scalar_outputs=False", code="gb0124",
                      hint="Set `torch._dynamo.config.capture_scalar_outputs = True`")
    assert item == "Set `torch._dynamo.config.capture_scalar_outputs = True`"  # torch's own hint, where it gives one
    assert break_help("Unsupported Tensor.item() call") == "keep the value on the device"
    assert break_help("Call to `torch._dynamo.graph_break()`", code="gb0025", hint="Remove the call.",
                      files=["/app/model.py"]) == "Remove the call."
    assert break_help("print", files=["/app/model.py"]) == "remove the break to get one graph"  # CG090's words
