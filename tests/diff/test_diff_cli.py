"""``graphtool diff`` from the command line on hand-built documents: it imports no torch, writes every format lint
writes, exits 1 only for what --fail-on lists, and refuses what it cannot compare with exit 2 and no file written."""

from __future__ import annotations

import json
import subprocess
import sys
import xml.etree.ElementTree as ET

import pytest
import yaml

from tests.diff.test_diff_documents import AFTER, BEFORE, cudagraphs_doc, lint_doc, lint_model


@pytest.fixture
def docs(tmp_path):
    def write(name: str, doc) -> str:
        path = tmp_path / name
        path.write_text(json.dumps(doc) if not isinstance(doc, str) else doc)
        return str(path)

    return write


def test_diff_imports_no_torch(docs, tmp_path):
    before, after = docs("before.json", BEFORE), docs("after.json", AFTER)
    code = ("import sys\nfrom graphtool.cli.main import run\n"
            f"rc = run(['diff', {before!r}, {after!r}, '--fail-on', 'new-breaks', '-o', {str(tmp_path / 'd.html')!r}])\n"
            "print('RC', rc, 'TORCH', sorted(m for m in sys.modules if m.split('.')[0] == 'torch'))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert "RC 1 TORCH []" in out


def test_text_shows_added_moved_removed_within_80_columns(cli, docs):
    rc, out, err = cli("diff", docs("before.json", BEFORE), docs("after.json", AFTER))
    assert rc == 0, err  # no --fail-on: the diff reports, it does not judge
    assert "graph breaks 2 -> 3: 1 added, 0 removed, 2 moved" in out
    assert "+ /w/m.py:9 [gb0124] Tensor.item" in out
    assert "~ /w/m.py:13 -> 15 [gb0059] Failed to trace builtin operator" in out
    assert "- x (user_input): data" in out
    assert out.rstrip().splitlines()[-1] == "diff: 1 new graph break"


def test_the_view_fits_80_columns_without_cutting_a_path():
    from graphtool.analysis.diff import diff_documents, read_document
    from graphtool.render.diff import diff_view
    from tests.helpers.console import render_text

    report = diff_documents(read_document(BEFORE, "before.json"), read_document(AFTER, "after.json"))
    text = render_text(diff_view(report), 80)
    assert all(len(ln) <= 80 for ln in text.splitlines())
    assert "/w/m.py:13 -> 15" in text


def test_fail_on_exits_1_and_every_ci_format_says_why(cli, docs):
    before, after = docs("before.json", BEFORE), docs("after.json", AFTER)
    rc, out, _ = cli("diff", before, after, "--fail-on", "new-breaks", "--format", "json")
    doc = json.loads(out)
    assert rc == 1 and doc["graphtool"]["command"] == "diff" and doc["failed"] == {"new-breaks": ["1 new graph break"]}
    rc, out, _ = cli("diff", before, after, "--fail-on", "new-breaks", "--format", "yaml")
    assert rc == 1 and yaml.safe_load(out)["passed"] is False
    rc, out, _ = cli("diff", before, after, "--fail-on", "new-breaks", "--format", "sarif")
    results = json.loads(out)["runs"][0]["results"]
    assert rc == 1 and {(r["ruleId"], r["level"]) for r in results} == {("diff/new-breaks", "error")}
    assert results[0]["locations"][0]["physicalLocation"]["region"]["startLine"] == 9
    rc, out, _ = cli("diff", before, after, "--fail-on", "new-breaks", "--format", "github")
    assert rc == 1 and "::error file=/w/m.py,line=9,title=graphtool diff%3A new graph break::" in out
    rc, out, _ = cli("diff", before, after, "--fail-on", "new-breaks,mutations", "--format", "junit")
    suite = ET.fromstring(out)
    assert rc == 1 and suite.get("tests") == "2" and suite.get("failures") == "1"  # the mutation went: not worse
    rc, _, _ = cli("diff", before, docs("moved.json", {**AFTER, "graph_breaks": AFTER["graph_breaks"][:2]}), "--fail-on", "new-breaks")
    assert rc == 0


def test_html_page_has_both_sides(cli, docs, tmp_path):
    page = tmp_path / "diff.html"
    rc, out, err = cli("diff", docs("before.json", BEFORE), docs("after.json", AFTER), "-o", page)
    html = page.read_text()
    assert rc == 0 and out == "" and "diff written to" in err and "graph breaks 2 -> 3" in err
    assert "<th>before</th><th>after</th>" in html and "/w/m.py:13" in html and "/w/m.py:15" in html


def test_yaml_documents_are_read_too(cli, docs):
    rc, out, _ = cli("diff", docs("a.yaml", yaml.safe_dump(cudagraphs_doc())), docs("b.json", cudagraphs_doc(False, 1)),
                     "--fail-on", "cudagraphs")
    assert rc == 1 and "eligible -> not eligible" in out


@pytest.mark.parametrize("content, says", [
    ("", "the file is empty"),
    ('{"graphtool": ', ":1:15: not graphtool's JSON"),
    ("\xff\xfe", "not graphtool's JSON"),
    ('{"models": []}', "not a graphtool document: it has no 'graphtool' header"),
    (json.dumps({**BEFORE, "graphtool": {**BEFORE["graphtool"], "schema_version": 9}}), "from a newer graphtool"),
    (json.dumps(lint_doc([lint_model("a.py")])), "before.json is a trace document and /"),
])
def test_what_cannot_be_compared_exits_2_and_writes_nothing(cli, docs, tmp_path, content, says):
    out_file = tmp_path / "d.sarif"
    rc, out, err = cli("diff", docs("before.json", BEFORE), docs("after.json", content), "--format", "sarif", "-o", out_file)
    assert rc == 2 and out == "" and says in err and not out_file.exists()


def test_bad_options_and_missing_files_exit_2(cli, docs, tmp_path):
    good = docs("a.json", BEFORE)
    for args, says in ((("--fail-on", "breaks"), "--fail-on 'breaks': not one of"), (("--format", "csv"), "--format 'csv'"),
                       (("--format", "html"), "give it a file with -o")):
        rc, _, err = cli("diff", good, good, *args)
        assert rc == 2 and says in err
    rc, _, err = cli("diff", good, str(tmp_path / "missing.json"))
    assert rc == 2 and "missing.json: no such file" in err


def test_a_folder_that_is_no_torch_trace_exits_2(cli, docs, tmp_path):
    good = docs("a.json", BEFORE)
    (tmp_path / "empty").mkdir()
    rc, _, err = cli("diff", good, str(tmp_path / "empty"))
    assert rc == 2 and "a folder with no TORCH_TRACE log" in err
    (tmp_path / "trace_dir").mkdir()
    (tmp_path / "trace_dir" / "dedicated_log_torch_trace_rank_0_x.log").write_text("not a record\n")
    rc, _, err = cli("diff", good, str(tmp_path / "trace_dir"))
    assert rc == 2 and "not a TORCH_TRACE folder: its logs hold no structured-trace record" in err


def test_two_torch_trace_folders_diff_as_two_runs(cli, tmp_path):
    """The loop the log tests recorded under torch 2.13 and 2.15 (tests/fixtures/torch_trace): read as graphtool log
    reads them, no torch imported; a side may also be graphtool log's own document."""
    from tests.log.recorded import LOOP_213, LOOP_215

    code = ("import sys\nfrom graphtool.cli.main import run\n"
            f"rc = run(['diff', {str(LOOP_213)!r}, {str(LOOP_215)!r}, '--format', 'sarif'])\n"
            "print('RC', rc, 'TORCH', sorted(m for m in sys.modules if m.split('.')[0] == 'torch'))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert "RC 0 TORCH []" in out

    rc, out, err = cli("diff", LOOP_213, LOOP_215, "--format", "json", "--fail-on", "new-breaks,recompiles")
    d = json.loads(out)
    m = d["models"][0]
    assert rc == 0, err
    assert (d["before"]["command"], d["torch"]["before"][:4], d["torch"]["after"][:4]) == ("log", "2.13", "2.15")
    assert (m["graph_breaks"]["unchanged"], m["recompiles"]["after"], m["graphs"]["after"]) == (1, 4, 6)
    assert m["compile_time"]["before"] > 0
    rc, out, _ = cli("log", LOOP_213, "--format", "json")
    (tmp_path / "log.json").write_text(out)
    rc, out, _ = cli("diff", tmp_path / "log.json", LOOP_213, "--format", "json")
    assert rc == 0 and json.loads(out)["models"][0]["graph_breaks"]["unchanged"] == 1


def test_the_json_document_follows_its_schema(cli, docs):
    jsonschema = pytest.importorskip("jsonschema")
    from importlib import resources

    schema = json.loads(resources.files("graphtool.schema").joinpath("diff.schema.json").read_text())
    for before, after in ((BEFORE, AFTER), (cudagraphs_doc(), cudagraphs_doc(False, 1, ("mutated inputs",)))):
        rc, out, _ = cli("diff", docs("a.json", before), docs("b.json", after), "--format", "json")
        jsonschema.validate(json.loads(out), schema)
