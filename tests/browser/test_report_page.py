"""The report page in a real browser: it loads cleanly, search finds a parameter, a diagnostic
shows its node, a module folds and unfolds; a screenshot is kept."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.helpers import ROOT

pytestmark = pytest.mark.slow  # each report traces a real model twice


@pytest.mark.parametrize("name", ["cpu_roundtrip", "transformer"])
def test_page_loads_without_console_errors(open_report, report_files, name):
    page = open_report(report_files[name])
    page.settle()
    assert page.errors == []
    assert "compiled region" in page.page.inner_text("#summary")
    # self-contained: nothing is loaded from anywhere
    assert page.eval("() => document.querySelectorAll('script[src], link[href], img[src]').length") == 0


def test_search_finds_a_named_parameter(open_report, report_files):
    page = open_report(report_files["transformer"])
    page.page.fill("#search", "encoder.layers.1.linear2.weight")
    page.page.press("#search", "Enter")
    page.settle()
    assert page.page.inner_text("#details h3") == "encoder.layers.1.linear2.weight"
    facts = page.data()["pictures"][page.state()["pic"]]["facts"]
    shown = page.eval("() => document.getElementById('details').dataset.node")
    assert facts[shown]["kind"] == "parameter" and facts[shown]["target"] == "encoder.layers.1.linear2.weight"
    assert facts[shown]["shape"] == [32, 64]  # nn.TransformerEncoderLayer(32, 4, dim_feedforward=64)
    # the parameter, or the module box that holds it at this fold level, is the one marked
    level = page.data()["pictures"][page.state()["pic"]]["levels"][page.state()["level"]]
    assert page.selected() == [level["members"].get(shown, shown)]
    # and the mark is visible: the shape's outline is drawn thick, not only a class on the element
    widths = page.eval("() => Array.from(document.querySelectorAll('#canvas g.node.selected polygon, #canvas g.node.selected path'))"
                       ".map(e => getComputedStyle(e).strokeWidth)")
    assert widths and set(widths) == {"4px"}
    assert page.errors == []


def test_clicking_a_diagnostic_shows_its_node(open_report, report_files):
    page = open_report(report_files["cpu_roundtrip"])
    findings = page.page.locator(".finding[data-node]")
    assert findings.count() >= 1
    for i in range(findings.count()):
        item = findings.nth(i)
        region, graph, node = (item.get_attribute(a) for a in ("data-region", "data-graph", "data-node"))
        item.click()
        page.settle()
        pic = page.data()["pictures"][page.state()["pic"]]
        assert (str(pic["region"]), pic["graph"]) == (region, graph)
        assert page.selected() == [node], f"finding {i} ({item.inner_text().splitlines()[0]})"
        assert page.eval("() => document.getElementById('details').dataset.node") == node
    # a device finding's node really is on the CPU in the graph torch traced on the meta stand-in
    copy = page.page.locator(".finding.sev-warning[data-node]").first
    copy.click()
    page.settle()
    node = copy.get_attribute("data-node")
    assert page.data()["pictures"][page.state()["pic"]]["facts"][node]["device"] == "cpu"
    assert page.errors == []


def test_folding_and_unfolding_a_module(open_report, report_files):
    page = open_report(report_files["transformer"])
    page.page.select_option("#level", "0")
    page.settle()
    pic = page.data()["pictures"][page.state()["pic"]]
    members = pic["levels"][0]["members"]
    box = sorted(b for b in page.drawn() if b in set(members.values()))[0]
    inside = {n for n, b in members.items() if b == box}
    assert not inside & page.drawn()  # folded: its nodes are not drawn
    page.page.locator("#canvas g.node", has=page.page.locator(f"title:text-is('{box}')")).click()
    page.settle()
    assert f"{len(inside)} nodes folded here" in page.page.inner_text("#details")
    page.page.click("#unfold-box")
    page.settle()
    assert page.state()["level"] > 0
    # the box is open: what it held is drawn, or held by smaller boxes inside it
    now = page.data()["pictures"][page.state()["pic"]]["levels"][page.state()["level"]]["members"]
    assert box not in page.drawn()
    assert all(n in page.drawn() or now.get(n, box) != box for n in inside)
    while page.page.is_enabled("#fold"):  # fold back, one level at a time
        page.page.click("#fold")
        page.settle()
    assert page.state()["level"] == 0 and box in page.drawn() and not inside & page.drawn()
    assert page.errors == []


def test_screenshot(open_report, report_files, tmp_path):
    """A picture of a real report, kept as an artifact; GRAPHTOOL_UPDATE_SCREENSHOT=1 also refreshes
    docs/report.png for the README."""
    page = open_report(report_files["cpu_roundtrip"])
    page.page.set_viewport_size({"width": 1400, "height": 1340})
    page.page.locator(".finding[data-node]").nth(2).click()  # the copy to the CPU
    page.settle()
    page.page.evaluate("() => window.scrollTo(0, 0)")
    assert page.selected()
    shot = tmp_path / "report.png"
    page.page.screenshot(path=str(shot))
    assert shot.stat().st_size > 10_000
    if os.environ.get("GRAPHTOOL_ARTIFACTS"):
        Path(os.environ["GRAPHTOOL_ARTIFACTS"]).mkdir(parents=True, exist_ok=True)
        (Path(os.environ["GRAPHTOOL_ARTIFACTS"]) / "report.png").write_bytes(shot.read_bytes())
    if os.environ.get("GRAPHTOOL_UPDATE_SCREENSHOT") == "1":
        (ROOT / "docs" / "report.png").write_bytes(shot.read_bytes())


def test_a_saved_tensor_leads_from_the_backward_to_the_forward_node(open_report, report_files):
    page = open_report(report_files["transformer"])
    page.page.click(".tab[data-picture='1']")  # region 0 backward
    page.settle()
    facts = page.data()["pictures"][1]["facts"]
    saved = next(n for n, f in facts.items() if f["kind"] == "saved")
    page.eval("(id) => window.graphtoolViewer.reveal(id)", saved)
    page.settle()
    page.page.click(f"#details a[data-goto='{saved}'][data-picture]")
    page.settle()
    assert page.state()["pic"] == 0
    forward = page.data()["pictures"][0]["facts"][saved]
    assert forward["kind"] == "op" and forward["saved"]  # the forward node whose value the backward reads
    assert page.eval("() => document.getElementById('details').dataset.node") == saved
    assert page.errors == []


def test_a_large_picture_opens_folded_readable_and_fit_shows_it_whole(open_report, report_files):
    """Issue 24: a 258-node forward opens folded by module; its every-node level, too tall to fit at a
    readable size, opens on its first node; "fit" then shows the whole picture."""
    page = open_report(report_files["transformer"])
    pic = page.data()["pictures"][page.state()["pic"]]
    opened = pic["levels"][page.state()["level"]]
    assert opened["depth"] is not None and opened["boxes"] <= 60, opened
    page.page.select_option("#level", str(len(pic["levels"]) - 1))
    page.settle()
    assert pic["levels"][page.state()["level"]]["depth"] is None
    view = lambda: page.eval("() => [window.graphtoolViewer.state.view, window.graphtoolViewer.state.full]")  # noqa: E731
    v, full = view()
    assert v["h"] < full["h"] / 2  # not shrunk to a smear: opened at a readable size...
    on_screen = page.eval("""() => {
        const c = document.getElementById('canvas').getBoundingClientRect();
        const top = Array.from(document.querySelectorAll('#canvas g.node')).map(g => g.getBoundingClientRect())
            .sort((a, b) => a.top - b.top)[0];
        return top.left >= c.left && top.right <= c.right && top.top >= c.top && top.bottom <= c.bottom;
    }""")
    assert on_screen  # ...on the graph's first node, not on empty space
    page.page.click("#fit")
    page.settle()
    v, full = view()
    eps = 1e-6
    assert v["x"] <= full["x"] + eps and v["y"] <= full["y"] + eps
    assert v["x"] + v["w"] >= full["x"] + full["w"] - eps and v["y"] + v["h"] >= full["y"] + full["h"] - eps
    assert page.errors == []


def test_phi_report_reads_as_its_modules(open_report, phi_report, tmp_path):
    """Issue 24: a transformers decoder's report opens folded, its boxes named as the model names its
    modules, the helper calls named after themselves; a clicked node says the device the other views
    say. GRAPHTOOL_UPDATE_SCREENSHOT=1 refreshes docs/report-phi.png for the README."""
    page = open_report(phi_report)
    page.page.set_viewport_size({"width": 1400, "height": 1000})
    page.settle()
    pic = page.data()["pictures"][page.state()["pic"]]
    assert pic["graph"] == "forward" and pic["levels"][page.state()["level"]]["depth"] is not None
    text = page.eval("() => Array.from(document.querySelectorAll('#canvas g.node text')).map(t => t.textContent)")
    assert {"model.layers.0.self_attn", "model.layers.1.mlp", "lm_head", "create_causal_mask()", "loss_function()"} <= set(text)
    assert not [t for t in text if t.startswith(("0.", "L.", "args."))]
    view = page.eval("() => window.graphtoolViewer.state.view")
    node = next(n for n, f in pic["facts"].items() if f["kind"] == "op" and (f["module"] or "").startswith("model.layers.0")
                and page.eval("(id) => !!Array.from(document.querySelectorAll('#canvas g.node title')).find(t => t.textContent === id)", n))
    page.page.locator("#canvas g.node", has=page.page.locator(f"title:text-is('{node}')")).click()
    page.settle()
    details = page.page.inner_text("#details")
    assert "cuda:0 (predicted)" in details and "meta" not in details
    assert page.eval("() => window.graphtoolViewer.state.view") == view  # a click does not move the picture
    assert page.errors == []
    page.page.evaluate("() => document.getElementById('graphs').scrollIntoView()")
    shot = tmp_path / "report-phi.png"
    page.page.screenshot(path=str(shot))
    if os.environ.get("GRAPHTOOL_UPDATE_SCREENSHOT") == "1":
        (ROOT / "docs" / "report-phi.png").write_bytes(shot.read_bytes())


def test_the_first_paint_shows_the_graph_before_the_viewer_runs(browser, report_files, tmp_path):
    """Issue 44: the graph pane said ``loading...`` in a screenshot or a print until the viewer had unpacked and laid
    in the picture. With scripts off (what a page shows before its script has run, a print, a headless screenshot)
    the pane now holds the first picture as laid out at build time."""
    context = browser.new_context(java_script_enabled=False, viewport={"width": 1400, "height": 1000})
    try:
        page = context.new_page()
        page.goto(report_files["cpu_roundtrip"].as_uri())
        canvas = page.locator("#canvas")
        assert "loading" not in canvas.inner_text()
        assert page.locator("#canvas svg g.node").count() > 3
        box = canvas.bounding_box()
        drawn = page.eval_on_selector("#canvas svg", "s => { const r = s.getBoundingClientRect(); return [r.width, r.height]; }")
        assert drawn[0] > 0.9 * box["width"] and drawn[1] > 0.9 * box["height"]  # sized to the pane, as the viewer sizes it
        shots = {}
        for media in ("screen", "print"):
            page.emulate_media(media=media)
            shots[media] = tmp_path / f"first-paint-{media}.png"
            canvas.screenshot(path=str(shots[media]))
        page.eval_on_selector("#canvas", "c => { c.innerHTML = ''; }")  # the same pane, empty: what 'loading...' was
        blank = tmp_path / "blank.png"
        canvas.screenshot(path=str(blank))
        for media, shot in shots.items():  # a drawn graph compresses far worse than a white pane
            assert shot.stat().st_size > 5 * blank.stat().st_size, (media, shot.stat().st_size, blank.stat().st_size)
        if os.environ.get("GRAPHTOOL_ARTIFACTS"):
            Path(os.environ["GRAPHTOOL_ARTIFACTS"]).mkdir(parents=True, exist_ok=True)
            (Path(os.environ["GRAPHTOOL_ARTIFACTS"]) / "report-first-paint.png").write_bytes(shots["screen"].read_bytes())
    finally:
        context.close()
