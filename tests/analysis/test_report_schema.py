"""report.schema.json describes every key trace prints: graph breaks with torch's code and hint,
skipped frames, no_graph; an undeclared key fails validation, so the schema cannot fall behind again."""

from __future__ import annotations

import copy
import json
from importlib import resources

import pytest

from tests.helpers import example

jsonschema = pytest.importorskip("jsonschema")
SCHEMA = json.loads(resources.files("graphtool.schema").joinpath("report.schema.json").read_text())


@pytest.fixture(scope="module")
def breaks_doc():
    """examples/graph_breaks.py: two breaks with torch's ids and hints, and a resumed frame dynamo skips."""
    import contextlib
    import io

    from graphtool.cli.main import run

    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        assert run(["trace", str(example("graph_breaks.py")), "--format", "json"]) == 0
    return json.loads(buf.getvalue())


def test_a_trace_with_breaks_and_skipped_frames_validates(breaks_doc):
    jsonschema.validate(breaks_doc, SCHEMA)
    assert all(b["code"] and b["code"].startswith("gb") for b in breaks_doc["graph_breaks"])
    assert any(b["hint"] for b in breaks_doc["graph_breaks"]) and breaks_doc["skipped_frames"]


def test_the_hand_made_trace_report_validates():
    from tests.render.test_views import TRACE

    jsonschema.validate(TRACE.to_dict(), SCHEMA)


@pytest.mark.parametrize("where, change", [
    ("top level", lambda d: d.update(summary="1 region")),
    ("a break", lambda d: d["graph_breaks"][0].update(gb_id="gb0025")),
    ("a break", lambda d: d["graph_breaks"][0].pop("code")),
    ("a break", lambda d: d["graph_breaks"][0].update(code="25")),
    ("a skipped frame", lambda d: d["skipped_frames"][0].pop("break_line")),
    ("top level", lambda d: d.pop("skipped_frames")),
])
def test_undeclared_or_missing_keys_fail(breaks_doc, where, change):
    doc = copy.deepcopy(breaks_doc)
    change(doc)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(doc, SCHEMA)


def test_the_steady_state_of_trace_cudagraphs_validates():
    """trace --cudagraphs runs the loop's steps: its steady_state is declared key by key (strict)."""
    import contextlib
    import io

    from graphtool.cli.main import run

    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        assert run(["trace", str(example("transpose_input.py")), "--cudagraphs", "inductor", "--format", "json"]) == 0
    doc = json.loads(buf.getvalue())
    jsonschema.validate(doc, SCHEMA)
    steady = doc["cudagraphs"]["steady_state"]
    assert steady["steps"] == 3 and steady["recompiles"] and not steady["steady"]
    steady["per_step"][0]["surprise"] = 1
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(doc, SCHEMA)


def test_an_eval_model_under_no_grad_is_reported_as_it_is(cli, tmp_path):
    # the JSON said training: true for any model with a parameter that requires grad
    import torch

    script = tmp_path / "eval_model.py"
    script.write_text("import torch\n\nmodel = torch.nn.Linear(4, 2).eval()\nexample_inputs = (torch.randn(3, 4),)\n"
                      "torch.set_grad_enabled(False)\n")
    with torch.enable_grad():  # the script's grad mode stays in its run, not in this process
        rc, out, err = cli("trace", script, "--format", "json")
    assert rc == 0, err
    doc = json.loads(out)
    assert (doc["model"]["training"], doc["model"]["grad_enabled"]) == (False, False)
    jsonschema.validate(doc, SCHEMA)
