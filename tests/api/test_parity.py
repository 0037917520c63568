"""One report object, every view: ``graphtool CMD --format json`` is the API's ``to_dict()`` for the same
model, and a count shown in several views (terminal, HTML, notebook) is read from one field.

An earlier report page showed one region's backward as 24 nodes in one place and 22 in another: two
traces (the model's own device, the meta stand-in) counted apart and shown unlabelled. These tests read
the views back and hold each count to the field it must come from.
"""

from __future__ import annotations

import contextlib
import functools
import io
import json
import re
from html import unescape
from pathlib import Path

import pytest

import graphtool
from tests.helpers import example

torch = pytest.importorskip("torch")

COMMANDS = ("trace", "mutations", "devices", "cudagraphs", "memory", "lint")
# a plain model, one with graph breaks and a skipped frame, one that writes its input in place
MODELS = ("mlp.py", "graph_breaks.py", "mutate_input.py")


@functools.cache
def _cli_document(command: str, name: str) -> tuple[int, dict]:
    """``graphtool COMMAND examples/NAME --format json``, in this process, once per process."""
    from graphtool.cli.main import run

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        rc = run([command, example(name), "--format", "json"])
    return rc, json.loads(out.getvalue())


@functools.cache
def _api_result(command: str, name: str):
    """``graphtool.COMMAND(model, *inputs)`` on the object the script builds, once per process."""
    from graphtool.capture.user.script import load_model

    spec = load_model(example(name))
    return getattr(graphtool, command)(spec.model, *spec.args, model_kwargs=spec.kwargs)


def _where_from(doc: dict, command: str) -> dict:
    """The document without what says how the model was handed over (a script's factory, an object's class)
    and, for lint, how long it took."""
    doc = json.loads(json.dumps(doc, default=str))
    if command == "lint":
        for m in doc["models"]:
            m.pop("entry"), m.pop("seconds")
    elif command != "bench":
        doc["model"].pop("entry")
    return doc


def _case(command: str, name: str):
    slow = command == "lint" or (name != "mlp.py" and command not in ("trace", "mutations"))  # lint: a child process each
    return pytest.param(command, name, marks=[pytest.mark.slow] if slow else [], id=f"{command}-{name}")


@pytest.mark.parametrize("command, name", [_case(c, n) for c in COMMANDS for n in MODELS])
def test_the_cli_prints_the_document_the_api_returns(command, name):
    rc, printed = _cli_document(command, name)
    result = _api_result(command, name)
    assert rc == 0
    assert _where_from(printed, command) == _where_from(result.to_dict(), command)
    if command != "lint":  # the object's entry is its class or function; the script's, its factory
        assert result.to_dict()["model"]["path"] == printed["model"]["path"] == example(name)


def _terminal_nodes(text: str) -> dict:
    """(region, graph) -> nodes, read from the terminal's region tables (``graphs`` or ``region N``)."""
    counts, region = {}, 0
    for line in text.splitlines():
        title = re.fullmatch(r"region (\d+)", line.strip())
        if title:
            region = int(title.group(1))
        row = re.match(r"│ (forward|backward) +│ +(\d+) │", line)
        if row:
            counts[(region, row.group(1))] = int(row.group(2))
    return counts


def _section(page: str, sid: str) -> str:
    m = re.search(rf'<section id="{sid}">(.*?)</section>', page, re.S)
    assert m, f"no {sid} section"
    return m.group(1)


def _html_nodes(section: str) -> dict:
    """(region, graph) -> nodes, read from an HTML table whose rows start ``region N graph | nodes``."""
    return {(int(r), g): int(n) for r, g, n in re.findall(r"<tr><td>region (\d+) (forward|backward)</td><td>(\d+)</td>", section)}


def _own_nodes(trace_report) -> dict:
    return {(r.index, g.kind): g.nodes for r in trace_report.regions for g in (r.forward, r.backward) if g is not None}


@pytest.mark.parametrize("name", ["mlp.py", "graph_breaks.py"])
def test_the_terminal_the_page_and_the_notebook_count_the_nodes_of_one_field(name):
    result = _api_result("trace", name)
    own = _own_nodes(result.report)
    assert own and all(n > 0 for n in own.values())
    text = result.text(200)
    assert _terminal_nodes(text) == own
    page = result.html()
    assert _html_nodes(_section(page, "regions")) == own
    bundle = result._repr_mimebundle_()
    assert bundle["text/plain"] == result.text() and _terminal_nodes(bundle["text/plain"]) == own  # the terminal's
    assert _html_nodes(_section(unescape(bundle["text/html"]), "regions")) == own
    # the summary's counts are the report's fields, and the view's last line is the summary
    assert result.text().rstrip().splitlines()[-1] == result.summary()
    assert result.summary().startswith(f"{len(result.report.regions)} compiled region")
    assert f"{len(result.graph_breaks)} graph break" in result.summary()


def test_a_result_of_every_command_renders_itself_and_none_is_switched_on_a_kind():
    from graphtool.api import Result

    for command in ("trace", "mutations", "devices", "cudagraphs", "memory"):
        result = _api_result(command, "mlp.py")
        assert isinstance(result, Result) and type(result).command == command
        assert not hasattr(result, "kind")
        assert result.summary() in result.text() and result.summary() in unescape(result.html())
        assert repr(result) == f"<graphtool {command}: {result.summary()}>"
    assert _api_result("mutations", "mutate_input.py").mutated_inputs[0].name == "total"


@pytest.mark.slow  # the page lays out every picture
def test_the_report_page_counts_each_graph_from_the_trace_it_draws():
    """The Compiled regions table counts the own-device graphs (``graphtool trace``'s field); the picture tabs
    and the Devices table count the stand-in's graphs (``graphtool devices``' field): each from its own field,
    and where the two differ the page says so in both places."""
    result = _api_result("report", "graph_breaks.py")
    page = result.html()
    own = _own_nodes(result.trace)
    standin = {(g.region, g.graph): g.nodes for g in result.devices.graphs}
    assert _html_nodes(_section(page, "regions")) == own
    assert _html_nodes(_section(page, "devices")) == standin
    tabs = {(int(r), g): int(n) for r, g, n in re.findall(r'region (\d+) (forward|backward) <small>(\d+) nodes</small>', page)}
    assert tabs == {(p.region, p.graph): p.nodes for p in result.pictures} == standin
    for key, n in own.items():
        if standin.get(key) not in (None, n):  # the two traces differ: the tab names the own-device count too
            assert f"it has {n}" in _section(page, "graphs")
    rc, printed = _cli_document("trace", "graph_breaks.py")
    assert _where_from(printed, "trace") == _where_from(result.to_dict(), "trace")


SHAPES = "tests/fixtures/shapes/cnn_last_batch.py"  # 8 steps, the last batch short: 2 graphs, 6 CUDA graphs recorded


@pytest.mark.slow  # two predictions of 8 steps each, advice included
def test_shapes_prints_the_document_the_api_returns_for_the_schedule_the_script_gives():
    import sys

    from graphtool.capture.user.script import load_model
    from graphtool.cli.main import run

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert run(["shapes", SHAPES, "--format", "json"]) == 0
    printed = json.loads(out.getvalue())
    printed["model"]["path"] = str(Path(printed["model"]["path"]).relative_to(Path.cwd()))
    spec = load_model(SHAPES)
    schedule = list(sys.modules[spec.module_name].get_input_schedule())
    result = graphtool.shapes(spec.model, *spec.args, schedule=schedule)
    assert type(result).command == "shapes" and result.summary() in result.text()
    api = _where_from(result.to_dict(), "shapes")
    cli = _where_from(printed, "shapes")
    # where the schedule came from is one difference: the script's function, or the list passed in; the
    # other, where the model is: the script, or the file of its class (an nn.Sequential's is torch's own)
    assert cli["shapes"].pop("source").startswith("get_input_schedule() at ")
    assert api["shapes"].pop("source") == "the schedule passed in"
    assert cli["model"].pop("path") == SHAPES and api["model"].pop("path").endswith("container.py")
    assert api == cli
    assert (cli["shapes"]["graphs_compiled"], cli["shapes"]["recordings"]) == (2, 6)
    # the page reads the same fields: one row per step, each step's graphs compiled
    section = _section(result.html(), "shapes")
    rows = re.findall(r"<tr><td>(\d+)</td><td>[^<]*</td><td>(\d+)</td>", section)
    assert [(int(a), int(b)) for a, b in rows] == [(s["step"], s["graphs_compiled"]) for s in cli["shapes"]["per_step"]]


@pytest.mark.slow  # two benches, each compiling the model
def test_bench_prints_the_document_the_api_returns_but_for_the_times():
    from graphtool.capture.user.script import load_model
    from graphtool.cli.main import run

    flags = dict(iters=3, repeat=1, warmup=1)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert run(["bench", example("mlp.py"), "--format", "json", *[f"--{k}={v}" for k, v in flags.items()]]) == 0
    printed = json.loads(out.getvalue())
    spec = load_model(example("mlp.py"))
    result = graphtool.bench(spec.model, *spec.args, **flags)
    assert type(result).command == "bench"
    assert "compile[default]" in result.text() and result.summary() in repr(result)  # it renders itself

    def shape(doc):  # every key and every mode's name and status; the times are the machine's
        return {"keys": sorted(doc), "settings": doc["settings"], "device": doc["device"],
                "modes": [(m["name"], m["status"], sorted(m)) for m in doc["modes"]]}

    assert shape(result.to_dict()) == shape(printed)
    assert [m[0] for m in shape(printed)["modes"]] == ["eager", "compile[default]"]
    assert result.summary().startswith("eager ") and "compile[default]" in result.summary()
    section = _section(result.html(), "bench")
    assert re.findall(r"<tr><td>([^<]+)</td><td>([^<]+)</td>", section) == [(m.name, m.status) for m in result.report.modes]


@pytest.mark.slow  # the fit's budget sweep compiles the step at each budget
def test_memory_fit_prints_the_document_the_api_returns():
    from graphtool.capture.user.script import load_model
    from graphtool.cli.main import run

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert run(["memory", example("mlp.py"), "--fit", "24GiB", "--budgets", "1,0.5", "--format", "json"]) == 0
    printed = json.loads(out.getvalue())
    spec = load_model(example("mlp.py"))
    result = graphtool.memory(spec.model, *spec.args, fit="24GiB", budgets="1,0.5")
    assert _where_from(printed, "memory") == _where_from(result.to_dict(), "memory")
    assert printed["fit"]["verdict"].startswith("fits 24.0 GiB") and len(printed["fit"]["budgets"]) == 2
