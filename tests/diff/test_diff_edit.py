"""Issue 47's "done when": a user traces one script before and after an edit and diffs the two reports; the new
break is added, the break the edit only moved is moved, the mutation the edit took out is removed, and
``--fail-on new-breaks`` fails the CI job. Real traces of tests/fixtures/diff/{before,after}.py, written to one path."""

from __future__ import annotations

import json
import shutil

import pytest

from tests.helpers import FIXTURES

pytest.importorskip("torch")


@pytest.fixture(scope="module")
def reports(tmp_path_factory):
    """``graphtool trace model.py --format json`` before and after the edit, the script at one path."""
    from graphtool.cli.main import run

    folder = tmp_path_factory.mktemp("edit")
    script = folder / "model.py"
    docs = {}
    for side in ("before", "after"):
        shutil.copy(FIXTURES / "diff" / f"{side}.py", script)
        out = folder / f"{side}.json"
        assert run(["trace", str(script), "--format", "json", "-o", str(folder / side)]) == 0
        shutil.copy(folder / side / "report.json", out)
        docs[side] = str(out)
    return docs


def test_the_edit_reads_as_added_moved_and_removed(reports, cli):
    rc, out, err = cli("diff", reports["before"], reports["after"], "--format", "json")
    assert rc == 0, err
    m = json.loads(out)["models"][0]
    assert [(b["code"], b["line"], b["source_text"]) for b in m["graph_breaks"]["added"]] == [
        ("gb0124", 17, "if y.sum().item() > 1e9:")]
    assert [(b["code"], b["before_line"], b["after_line"]) for b in m["graph_breaks"]["moved"]] == [("gb0059", 15, 16)]
    assert m["graph_breaks"]["removed"] == []
    assert m["mutations"] == {"added": [], "removed": [{"input": "steps", "kind": "buffer", "mutates": "data"}]}


def test_fail_on_new_breaks_gates_it(reports, cli):
    rc, out, _ = cli("diff", reports["before"], reports["after"], "--fail-on", "new-breaks")
    assert rc == 1 and out.rstrip().endswith("diff failed (new-breaks): 1 new graph break")
    rc, _, _ = cli("diff", reports["after"], reports["before"], "--fail-on", "new-breaks")  # the edit undone: breaks go
    assert rc == 0
