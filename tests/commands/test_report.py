"""``graphtool report``: the facts the page shows agree with torch's own, the fold membership is
exact, the page is self-contained and small, and bad output paths exit 2 before any tracing."""

from __future__ import annotations

import base64
import gzip
import json
import re
from pathlib import Path

import pytest

from tests.helpers import ROOT, example, standin_traced


@pytest.fixture(scope="module")
def reports():
    from graphtool.commands.report import report

    cache = {}

    def get(name: str):
        if name not in cache:
            (cache[name],) = report(example(name), memory=False)
        return cache[name]

    return get


def _page(result, command: str) -> str:
    """The report's page, as the command line ``command`` made it."""
    from dataclasses import replace

    return replace(result, made_by=command).html()


def _page_data(page: str) -> dict:
    return json.loads(re.search(r'<script type="application/json" id="graphtool-data">(.*?)</script>', page, re.S).group(1))


def test_fold_membership_is_the_folds_own():
    """Every node is drawn or held by exactly one drawn box, and each box holds the count collapse() gives it."""
    from graphtool.analysis.drawing import fx_drawing
    from graphtool.analysis.node_facts import fold_level

    capture = standin_traced("transformer.py")
    region = capture.regions[0]
    classes = {n: type(m).__name__ for n, m in capture.spec.model.named_modules()}
    drawing = fx_drawing(region.forward, "forward", region, classes=classes, main_device="meta")
    for depth in (1, 2, 3):
        folded, members = fold_level(drawing, depth)
        drawn = {n.id: n for n in folded.nodes}
        assert not any(n.id.startswith("probe") for n in folded.nodes)
        for n in drawing.nodes:
            assert (n.id in drawn) != (n.id in members), n.id
        boxes = [n for n in folded.nodes if n.kind == "module"]
        assert boxes
        for box in boxes:
            assert sum(1 for b in members.values() if b == box.id) == box.count
        assert set(members.values()) <= set(drawn)


def test_device_findings_point_at_nodes_torch_puts_on_the_cpu(reports):
    r = reports("cpu_roundtrip.py")
    capture = standin_traced("cpu_roundtrip.py")
    devices = [f for f in r.findings if f.kind == "device"]
    assert devices, [f.title for f in r.findings]
    for f in devices:
        region = capture.regions[f.node.region]
        gm = region.forward if f.node.graph == "forward" else region.backward
        node = next(n for n in gm.graph.nodes if n.name == f.node.node)
        assert str(node.meta["val"].device) == "cpu" or "-> cpu" in f.title or "cpu ->" in f.title
        assert f.source and f.source.endswith(f":{f.line}") and f.snippet


def test_mutation_finding_names_the_placeholder_aot_marks_mutated(reports):
    r = reports("mutate_input.py")
    (f,) = [f for f in r.findings if f.kind == "mutation"]
    assert f.node is not None and f.node.graph == "forward"
    capture = standin_traced("mutate_input.py")
    record = next(rec for rec in capture.regions[f.node.region].forward_inputs if rec.graph_name == f.node.node)
    assert record.mutates_data  # AOT's ViewAndMutationMeta says so
    facts = next(p.facts for p in r.pictures if (p.region, p.graph) == (f.node.region, "forward"))
    assert facts[f.node.node]["name"] == "total" == record.ref.name
    (m,) = r.trace.mutations.mutated  # the line is the mutation analysis's, when it knows one
    assert f.source == (str(m.source) if m.source else None)


def test_graph_breaks_are_findings_with_their_line(reports):
    from graphtool.capture.tracer import trace_model
    from graphtool.capture.user.script import load_model

    r = reports("graph_breaks.py")
    truth = trace_model(load_model(example("graph_breaks.py"))).breaks
    breaks = [f for f in r.findings if f.kind in ("graph-break", "skipped-frame")]
    assert {(Path(b.file).name, b.line) for b in truth} == {(Path(f.source.split(":")[0]).name, f.line) for f in breaks}
    lines = Path(example("graph_breaks.py")).read_text().splitlines()
    for f in breaks:
        assert dict(f.snippet)[f.line] == lines[f.line - 1]


def test_page_is_self_contained_and_every_picture_unpacks(reports):

    r = reports("cpu_roundtrip.py")
    page = _page(r, "graphtool report examples/cpu_roundtrip.py")
    assert not re.search(r"<(script|link|img|iframe)[^>]*\b(src|href)=", page)
    data = _page_data(page)
    assert len(data["pictures"]) == len(r.pictures) == 2
    for p, picture in zip(data["pictures"], r.pictures):
        assert p["levels"][p["default"]]["name"] == "every node"  # small graphs open unfolded
        packed = json.loads(gzip.decompress(base64.b64decode(data["svgs"][p["packed"]])))
        assert packed["facts"].keys() == picture.facts.keys()
        for level, members in zip(p["levels"], packed["members"]):
            level["members"] = members
        for level in p["levels"]:
            svg = gzip.decompress(base64.b64decode(data["svgs"][level["svg"]])).decode()
            assert svg.startswith("<svg")
            titles = set(re.findall(r"<title>([^<]*)</title>", svg))
            assert set(picture.facts) - {"output"} <= titles | set(level["members"])
    # every finding's node is in its picture
    for f in r.findings:
        if f.node:
            assert f.node.node in next(p.facts for p in r.pictures if (p.region, p.graph) == (f.node.region, f.node.graph))


def test_a_layout_that_takes_too_long_is_left_out_and_said(reports):
    from graphtool.commands.report import report

    (r,) = report(example("mlp.py"), memory=False, layout_timeout=1e-4)
    assert r.pictures == ()
    assert any("took longer than" in n for n in r.notes)


def test_bad_output_exits_2_before_tracing(cli, tmp_path):
    (tmp_path / "file").write_text("")
    rc, _, err = cli("report", example("mlp.py"), "-o", str(tmp_path))
    assert rc == 2 and "is a folder" in err
    rc, _, err = cli("report", example("mlp.py"), "-o", str(tmp_path / "file" / "r.html"))
    assert rc == 2 and "is a file, not a folder" in err
    rc, _, err = cli("report", example("no_such.py"), "-o", str(tmp_path / "r.html"))
    assert rc == 2 and not (tmp_path / "r.html").exists()
    for bad in ("0", "inf", "nan"):
        rc, _, err = cli("report", example("mlp.py"), "--layout-timeout", bad, "-o", str(tmp_path / "r.html"))
        assert rc == 2 and "--layout-timeout must be" in err and not (tmp_path / "r.html").exists()


def test_report_writes_the_page(cli, tmp_path):
    out = tmp_path / "mlp.html"
    rc, out_text, err = cli("report", example("mlp.py"), "-o", str(out), "--no-memory")
    assert rc == 0, err
    page = out.read_text()
    assert page.startswith("<!DOCTYPE html>") and "graphtool report" in page and out_text == ""
    assert "fc1.weight" in page and "CUDA graphs would be applied" in page
    assert not list(tmp_path.glob(".*.tmp"))


@pytest.mark.slow
def test_twelve_layer_encoder_page_is_under_3_mb(tmp_path):
    from graphtool.commands.report import report

    (r,) = report(str(ROOT / "benchmarks" / "encoder12.py"))
    page = _page(r, "graphtool report benchmarks/encoder12.py")
    assert len(page.encode()) < 3_000_000
    forward = next(p for p in r.pictures if p.graph == "forward")
    assert forward.levels[forward.default].depth is not None  # large graphs open folded by module
    assert r.memory is not None


@pytest.mark.slow  # over 8 s: the slow tier (docs/ci.md)
def test_lint_html_has_every_break_as_a_diagnostic(cli, tmp_path):
    out, js = tmp_path / "lint.html", tmp_path / "lint.json"
    rc, _, _ = cli("lint", example("graph_breaks.py"), example("mlp.py"), "--format", "html", "-o", str(out))
    assert rc == 0
    rc, _, _ = cli("lint", example("graph_breaks.py"), example("mlp.py"), "--format", "json", "-o", str(js))
    models = json.loads(js.read_text())["models"]
    page = out.read_text()
    assert page.startswith("<!DOCTYPE html>") and not re.search(r"\b(src|href)=", page)
    diagnostics = re.findall(r'<span class="where">([^<]*)</span>: <b>graph-break', page)
    expected = [f"{Path(b['file']).name}:{b['line']}" for m in models for b in m["breaks"]]
    assert sorted(Path(d.split(":")[0]).name + ":" + d.split(":")[1] for d in diagnostics) == sorted(expected)
    assert len(expected) >= 2
    assert page.count('<section class="model') == 2


def test_aliasing_findings_are_aots_output_aliases(reports):
    r = reports("view_outputs.py")
    aliased = r.trace.mutations.aliased_outputs  # from AOT's ViewAndMutationMeta
    findings = [f for f in r.findings if f.kind == "aliasing" and f.title.startswith("output")]
    assert aliased and len(findings) == len(aliased)
    for f, o in zip(findings, aliased):
        assert f.title.startswith(f"output {o.index} aliases ") and "None" not in f.title
        if o.alias_of["kind"] == "input":  # linked to the input's placeholder in the forward picture
            facts = next(p.facts for p in r.pictures if (p.region, p.graph) == (f.node.region, "forward"))
            assert facts[f.node.node]["name"] == o.alias_of["name"]


def test_node_facts_name_the_device_as_every_other_view_does(reports):
    """The node panel says ``cuda:0 (predicted)`` where the devices view does, not the stand-in's ``meta``;
    a node torch puts on the CPU still says ``cpu``."""
    r = reports("cpu_roundtrip.py")
    assert r.stand_in == "meta" and r.devices.shown_device == "cuda:0 (predicted)"
    shown = {f["device"] for p in r.pictures for f in p.facts.values() if f["device"]}
    capture = standin_traced("cpu_roundtrip.py")
    traced = {str(n.meta["val"].device) for reg in capture.regions for gm in (reg.forward, reg.backward) if gm is not None
              for n in gm.graph.nodes if hasattr(n.meta.get("val"), "device")}
    assert traced == {"meta", "cpu"}
    assert shown == {"cuda:0 (predicted)", "cpu"}


def test_a_graph_has_one_node_count_in_the_report_and_in_devices(reports):
    """Issue 24: the report's tab counted the picture's nodes (output markers included); it now shows the
    graph's count, the one devices shows for the same stand-in graph, and says what the picture adds."""

    r = reports("convnet_bn.py")
    by_graph = {(g.region, g.graph): g.nodes for g in r.devices.graphs}
    for p in r.pictures:
        assert p.nodes == by_graph[(p.region, p.graph)]
        assert p.drawn and p.drawn != p.nodes
    page = _page(r, "graphtool report")
    first = r.pictures[0]
    assert f"<small>{first.nodes} nodes</small>" in page and f"the picture draws {first.drawn}" in page


def test_report_ddp_has_a_ddp_section_and_each_split_graph_as_a_region(cli, tmp_path):
    """cpu_hop.py at 1 MB: 4 split graphs, each a region with its pictures and its own CUDA-graph verdict."""
    from tests.helpers import FIXTURES

    out = tmp_path / "r.html"
    rc, _, err = cli("report", FIXTURES / "ddp" / "cpu_hop.py", "--ddp", "--bucket-cap-mb", "1", "--no-memory",
                     "-o", str(out))
    assert rc == 0, err
    page = out.read_text()
    section = page[page.index('<section id="ddp">'):]
    section = section[:section.index("</section>")]
    assert "DDP(torch.compile(model)) on 2 ranks, bucket_cap_mb=1: 4 graphs from 1 dynamo graph" in section
    assert section.count("applied (forward, backward)") == 3 and "partly: 2 of 4 partitions CUDA-graphed" in section
    assert "outside every compiled graph" in section
    data = _page_data(page)
    assert sorted({p["region"] for p in data["pictures"]}) == [0, 1, 2, 3]
    assert "--ddp --bucket-cap-mb 1" in page  # the command that makes the page again


def test_report_ddp_says_unused_parameters_fail_the_second_step(cli, tmp_path):
    from tests.helpers import FIXTURES

    out = tmp_path / "r.html"
    rc, _, err = cli("report", FIXTURES / "ddp" / "unused.py", "--ddp", "--no-memory", "-o", str(out))
    assert rc == 0, err
    section = out.read_text().split('<section id="ddp">')[1].split("</section>")[0]
    assert "Parameters without gradient: unused.weight, unused.bias; step 2 raised: RuntimeError: Expected to" in section


def test_report_fsdp2_has_an_fsdp2_section_with_each_graphs_verdict_and_each_ranks_memory(cli, tmp_path):
    """blocks.py over 4 ranks: 2 compiled graphs (regions of the page), block 0's and the other three's,
    each CUDA-graphed; each rank's row with the activations its compiled graphs save."""
    from tests.helpers import FIXTURES

    out = tmp_path / "r.html"
    rc, _, err = cli("report", FIXTURES / "fsdp2" / "blocks.py", "--fsdp2", "--world-size", "4", "-o", str(out))
    assert rc == 0, err
    page = out.read_text()
    section = page[page.index('<section id="fsdp2">'):]
    section = section[:section.index("</section>")]
    assert "on 4 ranks: 2 compiled graphs, 1 graph break" in section
    assert section.count("applied (forward, backward)") == 2
    assert "<td>region 1</td><td>3</td>" in section
    assert "Memory per rank (optimizer: Adam)" in section and "<th>activations</th>" in section
    assert "Predicted only: the CUDA-graph verdict" in section
    data = _page_data(page)
    assert sorted({p["region"] for p in data["pictures"]}) == [0, 1]
    assert "--fsdp2 --world-size 4" in page  # the command that makes the page again


@pytest.mark.parametrize("args, expected", [
    (["--world-size", "0"], "--world-size 0: a process group needs at least one rank"),
    (["--device", "meta"], "--fsdp2 cannot run on --device meta"),
    (["--ddp"], "--fsdp2 with --ddp"),
])
def test_bad_report_fsdp2_options_exit_2_and_write_nothing(cli, tmp_path, args, expected):
    from tests.helpers import FIXTURES

    out = tmp_path / "r.html"
    rc, _, err = cli("report", FIXTURES / "fsdp2" / "blocks.py", "--fsdp2", *args, "-o", str(out))
    assert rc == 2 and expected in err
    assert not out.exists()


def _section_html(page: str, sid: str) -> str:
    return re.search(rf'<section id="{sid}">(.*?)</section>', page, re.S).group(1)


def _rows(html: str) -> list[list[str]]:
    return [[re.sub(r"<[^>]+>", "", c) for c in re.findall(r"<td>(.*?)</td>", tr, re.S)]
            for tr in re.findall(r"<tbody>(.*?)</tbody>", html, re.S)[0].split("</tr>") if "<td>" in tr]


def test_the_devices_table_reads_the_predicted_device_as_the_terminal_does(reports):
    """Issue 33b: the table under ``every node runs on cuda:0 (predicted)`` said ``meta: 5``: the stand-in's
    own name. It now reads as ``graphtool devices`` prints it, with the graph's node count and the
    nodes with no device."""

    r = reports("graph_breaks.py")
    devices = _section_html(_page(r, "graphtool report"), "devices")
    assert "meta" not in re.sub(r'<p class="note">.*?</p>', "", devices)
    for g, row in zip(r.devices.graphs, _rows(devices)):
        assert row[1:3] == [str(g.nodes), ", ".join(r.devices.shown_counts(g))]
        assert row[2].startswith("cuda:0 (predicted): ")


def test_a_graph_break_on_the_page_links_torchs_page_for_its_gb_id(reports):
    """Issue 33c: the CLI diagnostics and the notebook link ``gbNNNN``'s page; the report's findings and
    its list of breaks now do too."""

    r = reports("graph_breaks.py")
    page = _page(r, "graphtool report")
    codes = [b.code for b in r.trace.breaks]
    assert codes and all(codes)
    for code in codes:
        url = f"https://meta-pytorch.github.io/compile-graph-break-site/gb/{code}.html"
        assert f'href="{url}"' in _section_html(page, "findings") and f'href="{url}"' in _section_html(page, "regions")
    assert {f.url for f in r.findings if f.kind in ("graph-break", "skipped-frame")} == {
        f"https://meta-pytorch.github.io/compile-graph-break-site/gb/{c}.html" for c in codes}


def test_the_page_counts_graphs_breaks_and_nodes_as_trace_json_does(reports):
    """Issue 33a: a region's backward read 9 nodes on its tab and 7 in Compiled regions, the first from
    the graph traced for the predicted GPU (on meta, where inductor's pattern passes skip nodes), the
    second from the own-device graph. Each count now names the graph it counts: Compiled regions' nodes
    are ``graphtool trace --format json``'s, and the stand-in's count, where it differs, is a column of
    its own that equals the tab's and the Devices table's."""
    from graphtool.commands.trace import trace

    r = reports("graph_breaks.py")
    (t,) = trace(example("graph_breaks.py"))
    truth = t.to_dict()
    page = _page(r, "graphtool report")
    regions = _section_html(page, "regions")
    head = re.findall(r"<th>(.*?)</th>", regions)
    rows = {row[0]: row for row in _rows(regions)}
    own = {f"region {g['region']} {k}": g[k]["nodes"] for g in truth["graphs"] for k in ("forward", "backward") if g.get(k)}
    assert head[1] == "nodes (on cpu)" and {k: int(row[1]) for k, row in rows.items()} == own
    assert len(truth["graphs"]) == len({k.rsplit(" ", 1)[0] for k in rows})
    breaks = len(truth["graph_breaks"])
    assert f"{breaks} graph breaks" in r.summary() and regions.count("<li>") == breaks
    for code in (b["code"] for b in truth["graph_breaks"]):
        assert f"/gb/{code}.html" in regions
    standin = {f"region {g.region} {g.graph}": g.nodes for g in r.devices.graphs}
    assert standin != own  # the example whose two graphs differ: the page must say so
    assert head[2] == "nodes (traced for cuda:0 (predicted))"
    assert {k: int(row[2]) for k, row in rows.items()} == standin
    for p in r.pictures:
        tab = re.search(rf'data-picture="{r.pictures.index(p)}" title="([^"]*)"', page).group(1)
        assert tab.startswith(f"{p.nodes} graph nodes as traced for cuda:0 (predicted)")
        n = own[f"region {p.region} {p.graph}"]
        assert (f"it has {n};" in tab) == (n != p.nodes)
