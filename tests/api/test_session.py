"""``graphtool.load()``: one Session loads the model once and answers every command's question from what it kept;
the CLI and the API are two doors over it (issue 45)."""

from __future__ import annotations

import contextlib
import io
import json

import pytest

import graphtool
from tests.helpers import FIXTURES, example

torch = pytest.importorskip("torch")


@pytest.fixture(scope="module")
def asked():
    """trace, mutations, devices and cudagraphs asked of one Session on examples/mlp.py, counting its traces."""
    from graphtool.commands.session import Session

    traces = []
    real = Session.trace_spec

    def counted(self, spec, **options):
        traces.append("stand-in" if options.get("standin") else "own")
        return real(self, spec, **options)

    Session.trace_spec = counted
    try:
        with graphtool.load(example("mlp.py")) as s:
            answers = {c: getattr(s, c)() for c in ("trace", "mutations", "devices", "cudagraphs")}
            again = {c: getattr(s, c)() for c in answers}
            runs = s.loads.runs
    finally:
        Session.trace_spec = real
    return answers, again, traces, runs


def test_one_session_loads_once_and_traces_each_device_once(asked):
    answers, again, traces, runs = asked
    assert runs == 1  # the script ran once for the four questions
    assert sorted(traces) == ["own", "stand-in"]  # trace and mutations share one; devices and cudagraphs the other
    assert all(again[c] is answers[c] for c in answers)  # asked again: the answer kept


def test_a_session_answers_what_the_separate_commands_answer(asked):
    from graphtool.commands import cudagraphs, devices, mutations, trace

    answers = asked[0]
    for command, module in (("trace", trace), ("mutations", mutations), ("devices", devices)):
        (alone,) = getattr(module, command)(example("mlp.py"))
        assert answers[command].to_dict() == alone.to_dict(), command
    (alone,) = cudagraphs.cudagraphs(example("mlp.py"))
    assert answers["cudagraphs"].to_dict() == alone.to_dict()


#: on a GPU one trace serves: step 2 recompiles (its region left out), graph breaks, a step that runs its own optimizer
ON_GPU = (str(FIXTURES / "steady" / "int_attribute.py"), example("graph_breaks.py"), str(FIXTURES / "train_step" / "adamw.py"))


@pytest.mark.parametrize("path", ON_GPU, ids=lambda p: p.rsplit("/", 1)[-1])
def test_a_session_of_a_model_on_its_gpu_reads_trace_from_the_cudagraphs_trace(path, monkeypatch):
    """A model on its GPU is its own stand-in: trace and mutations read the first step of the three-step trace that
    devices and cudagraphs read, one trace in all, and answer what a one-step trace answers. Here the CPU model is
    taken for a GPU's (where the model lives is the one fact the path reads); tests/gpu runs it on a real one."""
    import graphtool.capture.standin.meta as meta
    from graphtool.commands.session import Session

    with graphtool.load(path) as s:
        alone = s.trace().to_dict(), s.mutations().to_dict()
    steps = []
    real = Session.trace_spec

    def counted(self, spec, **options):
        steps.append(options.get("steps", 1))
        return real(self, spec, **options)

    monkeypatch.setattr(Session, "trace_spec", counted)
    monkeypatch.setattr(meta, "accelerator_of", lambda spec: "cuda")
    with graphtool.load(path) as s:
        assert (s.trace().to_dict(), s.mutations().to_dict()) == alone
        s.devices(), s.cudagraphs()
    assert steps == [3]


def test_a_one_question_report_forgets_each_trace_once_its_facts_are_taken():
    """The CLI's sessions and ``graphtool.report(model)``'s answer one question: report takes what it reads of the
    stand-in's trace (verdict, devices, pictures) and forgets it before the own-device trace is made, then forgets that
    one too once the page's facts are taken (issue 49: a 5,502-module model's report peaked in its second trace, on the
    first one's leftovers); a session the caller keeps keeps both for the next question."""
    import gc
    import weakref

    from graphtool.commands.session import Session

    for one_question in (True, False):
        standin_kept_at_own = []
        real = Session.own_trace

        def watched(self, _real=real, _kept=standin_kept_at_own):
            _kept.append(any(k[0] in ("standin", "verdict") for k in self._kept))
            return _real(self)

        Session.own_trace = watched
        try:
            with graphtool.load(torch.nn.Linear(4, 4), torch.randn(2, 4), one_question=one_question) as s:
                verdict = s.cudagraphs()
                standin = weakref.ref(s.standin_trace()[0])
                traced = s.trace()
                own = weakref.ref(s.own_trace()[0])
                page = s.report(memory=False)
                gc.collect()
                gone = (own() is None, standin() is None)
        finally:
            Session.own_trace = real
        assert standin_kept_at_own[-1] is not one_question  # the report's own call
        assert gone == (one_question, one_question)
        # what the page says of each trace, taken before it went
        assert page.trace.to_dict() == traced.report.to_dict()
        assert page.verdict.to_dict() == verdict.report.to_dict()


def test_every_cli_option_has_its_api_keyword_and_one_declaration():
    """The Typer commands and the API read one table: each CLI flag is a keyword of ``graphtool.load()`` or of the
    command's method, or a view the result itself answers (``--format``: ``to_dict()``, ``--check``: ``found``)."""
    import inspect

    import typer.main

    import graphtool.api
    from graphtool.cli.main import app
    from graphtool.commands.options import COMMANDS, LOAD
    from graphtool.commands.session import Session

    group = typer.main.get_group(app)
    load = set(inspect.signature(graphtool.load).parameters)
    for name, command in COMMANDS.items():
        own = set(inspect.signature(getattr(Session, name)).parameters) - {"self"}
        door = set(inspect.signature(getattr(graphtool.api, name)).parameters)
        assert own <= door and {o.name for o in LOAD} <= door | {"progress"} | load
        views = {o.name for o in command.options if o.view}
        for param in group.commands[name].params:
            if param.name in ("model", "models"):
                continue
            assert param.name in own | load | views, f"graphtool {name} {param.opts[0]}: no API keyword"
            assert param.opts[0] == command.option(param.name).cli  # the flag the table declares


def test_an_unknown_option_is_an_error_not_a_model_keyword():
    from graphtool.errors import UsageError

    net = torch.nn.Linear(2, 2)
    with pytest.raises(UsageError, match=r"^graphtool.load\(\) got an unknown option ddpp="):
        graphtool.load(net, torch.ones(1, 2), ddpp=True)
    with pytest.raises(UsageError, match=r"^Session.trace\(\) got an unknown option steps="):
        graphtool.load(net, torch.ones(1, 2)).trace(steps=3)
    with pytest.raises(UsageError, match="inputs and model_kwargs= are a model object's"):
        graphtool.load(example("mlp.py"), torch.ones(1, 2))


def test_the_optimizer_of_the_object_api_is_counted_in_the_fit():
    """``optimizer=`` is the object API's ``get_optimizer``: the fit counts its state (Adam: two moments per
    parameter), where without it the fit has none and says so."""
    net = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.ReLU(), torch.nn.Linear(64, 64))
    x = torch.randn(8, 64)
    bare = graphtool.memory(net, x, fit="24GiB").fit
    adam = graphtool.memory(net, x, fit="24GiB", optimizer=lambda m: torch.optim.Adam(m.parameters())).fit
    params = sum(p.numel() * 4 for p in net.parameters())
    assert bare.held.optimizer_state is None and "optimizer=" in graphtool.memory(net, x, fit="24GiB").text()
    assert 2 * params <= adam.held.optimizer_state <= 2 * params + 64  # two moments (and a step count) per parameter
    assert all(p.grad is None for p in net.parameters())  # the model left as it was


@pytest.mark.slow  # two DDP traces of two ranks each
def test_a_session_under_ddp_traces_what_the_cli_prints():
    from graphtool.cli.main import run

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert run(["trace", example("mlp.py"), "--ddp", "--world-size", "2", "--format", "json"]) == 0
    api = graphtool.load(example("mlp.py"), ddp=True, world_size=2).trace().to_dict()
    printed = json.loads(out.getvalue())
    assert json.loads(json.dumps(api, default=str)) == printed
    assert printed["ddp"]["world_size"] == 2 and printed["ddp"]["ranks"]["built"]


RECOMPILES = str(FIXTURES / "steady" / "int_attribute.py")  # an int attribute read in forward: step 2 recompiles
PAGE_MODELS = ("mlp.py", "graph_breaks.py", "mutate_input.py", "cpu_roundtrip.py", RECOMPILES)


@pytest.fixture(scope="module")
def pages():
    """Each model's report page and its commands' documents, asked of one Session per model."""
    out = {}
    for name in PAGE_MODELS:
        with graphtool.load(name if "/" in name else example(name)) as s:
            report = s.report()
            docs = {c: getattr(s, c)().to_dict() for c in ("trace", "mutations", "devices", "cudagraphs", "memory")}
            out[name] = (report, report.html(), docs, s.cudagraphs())
    return out


def _section(page: str, sid: str) -> str:
    import re

    return re.search(rf'<section id="{sid}">(.*?)</section>', page, re.S).group(1)


def _rows(html: str, cls: str = "") -> list[list[str]]:
    import re
    from html import unescape

    table = re.search(rf'<table class="{cls}">(.*?)</table>', html, re.S)
    return [[unescape(re.sub("<[^>]+>", "", c)) for c in re.findall(r"<td>(.*?)</td>", row, re.S)]
            for row in re.findall(r"<tr>(.*?)</tr>", table.group(1), re.S) if "<td>" in row] if table else []


@pytest.mark.slow  # five reports, their pictures laid out
@pytest.mark.parametrize("name", PAGE_MODELS, ids=[n.rsplit("/", 1)[-1] for n in PAGE_MODELS])
def test_every_figure_on_the_report_page_is_the_commands_own(pages, name):
    """The page's regions, mutations, devices, CUDA-graph verdict with its steady state, and memory are what trace,
    mutations, devices, cudagraphs and memory print as JSON: one verdict, from the same call."""
    from graphtool.analysis.memory.saved import format_bytes

    report, page, docs, cudagraphs = pages[name]
    assert report.verdict is cudagraphs.report  # the very verdict cudagraphs gives, its steady state included
    trace = docs["trace"]
    own = {(f"region {g['region']} {k}"): (str(g[k]["nodes"]), str(len(g[k]["placeholders"])))
           for g in trace["graphs"] for k in ("forward", "backward") if g[k]}
    assert {r[0]: (r[1], r[-2]) for r in _rows(_section(page, "regions"))} == own
    assert _section(page, "mutations").count(docs["mutations"]["verdict"]) == 1
    devices = docs["devices"]["devices"]
    assert devices["verdict"] in _section(page, "devices")
    assert [(r[0], r[1], r[3], r[4]) for r in _rows(_section(page, "devices"))] == [
        (f"region {g['region']} {g['graph']}", str(g["nodes"]), str(len(g["off_device"])), str(len(g["copies"])))
        for g in devices["graphs"]]
    cg, section = docs["cudagraphs"]["cudagraphs"], _section(page, "cudagraphs")
    assert f'class="verdict {"ok" if cg["eligible"] else "bad"}">{cudagraphs.summary()}' in section
    steady = cg["steady_state"]
    assert steady["summary"] in section.replace("&#x27;", "'")
    assert _rows(section, "steps") == [[str(s[k]) for k in ("step", "graphs_compiled", "recompiles", "warmups",
                                        "recordings", "replays", "skipped_calls")] for s in steady["per_step"]]
    assert sorted((r[0], r[2]) for r in _rows(section)) == sorted(
        (r["code"], f"region {r['region']} {r['graph']}" if r["region"] is not None else "between regions")
        for r in cg["reasons"])
    mem = docs["memory"]["memory"]
    table = {r[0]: (r[1], r[2]) for r in _rows(_section(page, "memory"))}
    for kind in ("parameters", "gradients", "buffers"):
        assert table[kind] == (str(mem[kind]["tensors"]), format_bytes(mem[kind]["bytes"]))
    assert table["saved for backward (eager)"][1] == format_bytes(mem["eager"]["bytes"])
    assert docs["mutations"]["verdict"] in report.summary() and devices["verdict"] in report.summary()
    assert f"{cudagraphs.summary()}; steady state {steady['summary']}" in report.summary()


@pytest.mark.slow  # the CLI's cudagraphs of the recompiling model, in this process
def test_the_page_tells_the_steady_state_cudagraphs_prints(pages, cli):
    rc, out, err = cli("cudagraphs", RECOMPILES, "--format", "json")
    steady = json.loads(out)["cudagraphs"]["steady_state"]
    assert rc == 0 and not steady["steady"] and steady["summary"].count("NOT STEADY: step 3 still compiles")
    report, page, _, _ = pages[RECOMPILES]
    assert steady["summary"] in _section(page, "cudagraphs") and "NOT STEADY" in report.summary()
