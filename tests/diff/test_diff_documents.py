"""graphtool diff over hand-built documents (torch is never imported): the header read and checked, breaks matched
by what they are (moved code is moved), each section compared, --fail-on judged."""

from __future__ import annotations

import copy

import pytest

from graphtool.analysis.diff import diff_documents, parse_fail_on, read_document
from graphtool.errors import UsageError


def head(command: str, version: int = 1, torch: str = "2.13.0+cpu") -> dict:
    return {"command": command, "schema_version": version, "graphtool_version": "0.1.0", "torch_version": torch}


def brk(line: int, text: str, code: str = "gb0059", reason: str = "Failed to trace builtin operator", file: str = "/w/m.py") -> dict:
    return {"file": file, "line": line, "reason": reason, "code": code, "hint": None, "source_text": text}


def trace_doc(breaks, mutated=("x",), torch="2.13.0+cpu", nodes=(6, 7), path="/w/m.py", **extra) -> dict:
    inputs = [{"name": n, "kind": "user_input", "mutates_data": True, "mutates_metadata": False, "mutates_storage": False}
              for n in mutated]
    return {"graphtool": head("trace", torch=torch), "schema_version": 1, "graphtool_version": "0.1.0", "torch_version": torch,
            "model": {"path": path, "entry": "get_model_and_inputs"}, "graph_breaks": list(breaks), "skipped_frames": [],
            "graphs": [{"region": 0, "forward": {"nodes": nodes[0]}, "backward": {"nodes": nodes[1]}}],
            "mutations": {"inputs": inputs}, "aliasing": {"outputs": []}, **extra}


def diff(before: dict, after: dict, fail_on: str | None = None):
    return diff_documents(read_document(before, "before.json"), read_document(after, "after.json"), parse_fail_on(fail_on))


BEFORE = trace_doc([brk(13, 'print("step")'), brk(20, "torch._dynamo.graph_break()", "gb0025", "Call to graph_break()")])
# the edit: two lines added above the print (it moved), a new break, the mutation of x gone
AFTER = trace_doc([brk(15, 'print("step")'), brk(22, "torch._dynamo.graph_break()", "gb0025", "Call to graph_break()"),
                   brk(9, "y.item()", "gb0124", "Tensor.item")], mutated=(), nodes=(6, 9))


def test_an_edit_reads_as_added_moved_and_removed():
    m = diff(BEFORE, AFTER).models[0]
    assert [(b.code, b.line) for b in m.breaks.added] == [("gb0124", 9)]
    assert [(x.after.code, x.before_line, x.after_line) for x in m.breaks.moved] == [("gb0059", 13, 15), ("gb0025", 20, 22)]
    assert m.breaks.removed == ()
    assert m.mutations.removed == (("x", "user_input", "data"),) and m.mutations.added == ()
    assert [(r, g, c.before, c.after) for r, g, c in m.nodes] == [(0, "backward", 7, 9)]


def test_fail_on_new_breaks_fails_on_an_added_break_not_on_a_moved_one():
    assert diff(BEFORE, AFTER, "new-breaks").exit_code() == 1
    moved_only = copy.deepcopy(AFTER)
    moved_only["graph_breaks"] = moved_only["graph_breaks"][:2]
    report = diff(BEFORE, moved_only, "new-breaks")
    assert report.exit_code() == 0 and report.failed == {}


def test_the_same_break_at_the_same_line_with_its_text_edited_is_the_same_break():
    after = trace_doc([brk(13, 'print("step", flush=True)'), brk(20, "torch._dynamo.graph_break()", "gb0025", "Call to graph_break()")])
    m = diff(BEFORE, after).models[0]
    assert m.breaks.added == m.breaks.removed == m.breaks.moved == () and m.breaks.unchanged == 2


def test_two_checkouts_of_one_script_match_by_the_path_under_the_model_folder():
    moved = trace_doc([brk(13, 'print("step")', file="/ci/run2/m.py"),
                       brk(20, "torch._dynamo.graph_break()", "gb0025", "Call to graph_break()", file="/ci/run2/m.py")],
                      path="/ci/run2/m.py")
    m = diff(BEFORE, moved).models[0]
    assert m.breaks.unchanged == 2 and not m.breaks.added and not m.breaks.removed


def test_a_break_whose_kind_changed_is_removed_and_added():
    after = trace_doc([brk(13, 'print("step")', code="gb0060"), brk(20, "torch._dynamo.graph_break()", "gb0025", "Call to graph_break()")])
    m = diff(BEFORE, after).models[0]
    assert [b.code for b in m.breaks.added] == ["gb0060"] and [b.code for b in m.breaks.removed] == ["gb0059"]


def test_several_breaks_with_one_key_pair_in_line_order():
    two = trace_doc([brk(5, "print(x)"), brk(9, "print(x)")])
    three = trace_doc([brk(6, "print(x)"), brk(10, "print(x)"), brk(30, "print(x)")])
    m = diff(two, three).models[0]
    assert [(x.before_line, x.after_line) for x in m.breaks.moved] == [(5, 6), (9, 10)] and [b.line for b in m.breaks.added] == [30]


def lint_doc(models) -> dict:
    return {"graphtool": head("lint"), "schema_version": 1, "graphtool_version": "0.1.0", "passed": True, "baseline": None,
            "models": models}


def lint_model(path, breaks=(), recompiles=(), graphs=1, **extra) -> dict:
    return {"path": path, "entry": None, "graph_count": graphs, "graph_break_count": len(breaks),
            "breaks": [{**b, "occurrences": b.pop("count", 1)} for b in copy.deepcopy(list(breaks))],
            "recompiles": list(recompiles), "skipped_frames": [], **extra}


def test_lint_documents_pair_models_by_path_and_judge_recompiles():
    rec = {"function": "forward", "file": "/w/a.py", "line": 4, "reason": "tensor 'x' size mismatch at index 0"}
    before = lint_doc([lint_model("a.py"), lint_model("b.py", [brk(3, "print(x)", file="/w/b.py")])])
    after = lint_doc([lint_model("b.py", [brk(3, "print(x)", file="/w/b.py")]), lint_model("a.py", recompiles=[rec], graphs=2),
                      lint_model("c.py")])
    report = diff(before, after, "new-breaks,recompiles")
    by = {m.name: m for m in report.models}
    assert by["a.py"].recompiles.before == 0 and by["a.py"].recompiles.after == 1 and by["a.py"].graphs.after == 2
    assert by["b.py"].breaks.unchanged == 1
    assert report.only_after == ("c.py",) and report.exit_code() == 1
    assert list(report.failed) == ["recompiles"]


def cudagraphs_doc(eligible=True, graphed=2, skips=(), steady=True) -> dict:
    reasons = [{"code": "mutated-input", "cg": "CG001", "message": m, "skips": True} for m in skips]
    return {"graphtool": head("cudagraphs"), "model": {"path": "/w/m.py", "entry": None, "regions_compiled": 1},
            "cudagraphs": {"backend": "inductor", "eligible": eligible, "reasons": reasons,
                           "coverage": {"partitions": 2, "partitions_cudagraphed": graphed, "percent": 50 * graphed},
                           "steady_state": {"steady": steady, "recordings": 2, "rerecords": 0}}}


def test_a_cudagraph_verdict_that_stopped_applying_fails_fail_on_cudagraphs():
    report = diff(cudagraphs_doc(), cudagraphs_doc(False, 1, ("mutated inputs (1 instances)",), False), "cudagraphs")
    cg = report.models[0].cudagraphs
    assert cg.gained == ("CG001: mutated inputs (1 instances)",)
    assert "eligible -> not eligible" in cg.worse and "partitions graphed 2/2 -> 1/2" in cg.worse
    assert report.exit_code() == 1
    better = diff(cudagraphs_doc(False, 1, ("mutated inputs",)), cudagraphs_doc(), "cudagraphs")
    assert better.exit_code() == 0 and better.models[0].cudagraphs.lost == ("CG001: mutated inputs",)


def memory_doc(saved: int, peak: int | None = None) -> dict:
    doc = {"graphtool": head("memory"), "model": {"path": "/w/m.py", "entry": None}, "memory": {"compiled": {"bytes": saved}}}
    if peak is not None:
        doc["fit"] = {"compiled": {"peak": peak}}
    return doc


@pytest.mark.parametrize("after, fails", [(1100, False), (1101, True), (900, False)])
def test_memory_threshold_is_a_growth_in_percent(after, fails):
    report = diff(memory_doc(1000), memory_doc(after), "memory:+10%")
    assert report.exit_code() == int(fails)
    assert report.models[0].saved_bytes.percent == round((after - 1000) / 10, 1)


def test_memory_without_a_threshold_fails_on_any_growth_of_the_step_peak():
    assert diff(memory_doc(10, 2000), memory_doc(10, 2001), "memory").exit_code() == 1


def test_coverage_that_fell_fails_fail_on_coverage():
    cov = lambda share: {"torch_calls": 10, "settings": [{"nested_graph_breaks": False, "in_graphs": int(share * 10), "share": share}]}  # noqa: E731
    before = trace_doc([], calls_captured=9, fallbacks_to_eager=0, coverage=cov(0.9))
    after = trace_doc([], calls_captured=7, fallbacks_to_eager=1, coverage=cov(0.7))
    report = diff(before, after, "coverage")
    assert report.failed["coverage"] == ["calls captured 9 -> 7", "fallbacks to eager 0 -> 1"]
    assert diff(after, before, "coverage").exit_code() == 0


def test_a_log_document_by_issue_46s_names():
    log = {"graphs_compiled": 3, "graph_breaks": [{"file": "/w/m.py", "line": 4, "gb_id": "gb0025", "reason": "graph_break()",
                                                    "count": 2, "ranks": [0, 1]}],
           "recompiles": [], "compile_time": {"total_seconds": 2.5}, "cudagraph_skips": [], "log": {"torch_version": "2.15.0"}}
    later = copy.deepcopy(log)
    later["graph_breaks"][0]["count"] = 5
    later["recompiles"] = [{"frame": "forward", "reason": "size mismatch", "file": "/w/m.py", "line": 3}]
    later["compile_time"] = {"total_seconds": 4.0}
    report = diff(log, later, "recompiles")
    m = report.models[0]
    assert report.before.kind == "log" and report.before.torch_version == "2.15.0"
    assert m.breaks.unchanged == 1 and m.breaks.more_often[0][1].count == 5
    assert (m.compile_seconds.before, m.compile_seconds.after) == (2.5, 4.0)
    assert report.exit_code() == 1


def test_a_log_documents_capture_coverage_is_diffed_like_a_traces():
    log = {"graphs_compiled": 3, "graph_breaks": [], "recompiles": [], "compile_time": {}, "cudagraph_skips": [],
           "calls_captured": 12, "fallbacks_to_eager": 0, "log": {"torch_version": "2.15.0"}}
    later = dict(log, calls_captured=8, fallbacks_to_eager=1)
    assert diff(log, later, "coverage").failed["coverage"] == ["calls captured 12 -> 8", "fallbacks to eager 0 -> 1"]
    assert diff(log, dict(log, calls_captured=None), "coverage").exit_code() == 0  # a figure the log could not give


@pytest.mark.parametrize("doc, says", [
    ([1], "holds a JSON array, not an object"),
    ({"a": 1}, "has no 'graphtool' header"),
    ({"graphtool": head("trace", version=2), "graphs": []}, "schema version 2, from a newer graphtool"),
    ({"graphtool": head("teleport"), "graphs": []}, "'graphtool teleport', a command this graphtool does not know"),
    ({"graphtool": head("bench")}, "a bench document; graphtool diff compares"),
    ({"graphtool": {"command": "trace", "schema_version": "1"}}, "has no integer schema_version"),
])
def test_what_is_not_a_diffable_graphtool_document_is_refused(doc, says):
    with pytest.raises(UsageError) as err:
        read_document(doc, "x.json")
    assert says in err.value.message and err.value.exit_code == 2


def test_two_kinds_are_refused_naming_both_but_a_report_compares_with_a_trace():
    with pytest.raises(UsageError, match="before.json is a memory document and after.json a lint document"):
        diff(memory_doc(1), lint_doc([]))
    report_doc = {**BEFORE, "graphtool": head("report")}
    assert diff(report_doc, AFTER).models[0].breaks.added


def test_a_fail_on_item_neither_document_can_judge_is_refused():
    with pytest.raises(UsageError, match="--fail-on memory: lint documents say nothing it judges"):
        diff(lint_doc([lint_model("a.py")]), lint_doc([lint_model("a.py")]), "memory")


def test_the_document_says_both_sides_and_what_failed():
    d = diff(BEFORE, trace_doc(AFTER["graph_breaks"], torch="2.15.0"), "new-breaks").to_dict()
    assert d["torch"] == {"before": "2.13.0+cpu", "after": "2.15.0"}
    assert d["failed"] == {"new-breaks": ["1 new graph break"]} and d["passed"] is False
    assert set(d["models"][0]["graph_breaks"]) >= {"added", "removed", "moved"}
    assert set(d["models"][0]["mutations"]) == {"added", "removed"}


def test_several_models_in_one_document_pair_by_script():
    def several(*docs):
        return {"models": [dict(d) for d in docs]}

    a2 = trace_doc([brk(3, "print(x)", file="/w/b.py")], path="/w/b.py")
    report = diff(several(BEFORE, a2), several(a2, AFTER), "new-breaks")
    assert [m.name.split(":")[0] for m in report.models] == ["/w/m.py", "/w/b.py"]
    assert report.failed == {"new-breaks": ["/w/m.py:get_model_and_inputs: 1 new graph break"]}
