"""Issue 49: the report page of a model of many identical blocks (benchmarks/large_model.py at 12 blocks;
bench_large.py times the full 500) in a real browser: every fold level of both graphs is drawn, search
finds a parameter deep in the run of blocks, a click on the run's box (one fold level up)
says what it holds and unfolds it."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.helpers import FIXTURES

pytestmark = pytest.mark.slow  # one report of a 134-module model: two traces


@pytest.fixture(scope="module")
def large_report(tmp_path_factory):
    from graphtool.cli.main import run

    out = tmp_path_factory.mktemp("large") / "large_blocks.html"
    rc = run(["report", str(FIXTURES / "pictures" / "large_blocks.py"), "-o", str(out), "--no-memory"])
    assert rc == 0, f"graphtool report large_blocks exited {rc}"
    return out


def test_a_many_block_models_page_folds_searches_and_unfolds(open_report, large_report, tmp_path):
    page = open_report(large_report)
    pictures = page.data()["pictures"]
    assert [p["graph"] for p in pictures] == ["forward", "backward"]
    # the backward's fold levels are drawn too: its residual sums once made each a cycle Graphviz gave up on
    for pic in pictures:
        assert [lv["depth"] for lv in pic["levels"]][:3] == [1, 2, 3], (pic["graph"], [lv["name"] for lv in pic["levels"]])
    assert "not drawn" not in page.page.inner_text("body")

    page.page.fill("#search", "blocks.7.up2.weight")  # inside the run of identical blocks
    page.page.press("#search", "Enter")
    page.settle()
    assert page.page.inner_text("#details h3") == "blocks.7.up2.weight"
    shown = page.eval("() => document.getElementById('details').dataset.node")
    level = page.data()["pictures"][page.state()["pic"]]["levels"][page.state()["level"]]
    assert page.selected() == [level["members"].get(shown, shown)]

    # one level up the eleven blocks after the first are one box: a click says so, "unfold" opens it
    levels = page.data()["pictures"][page.state()["pic"]]["levels"]
    up = [lv["depth"] for lv in levels].index(2)
    page.page.select_option("#level", str(up))
    page.settle()
    box = levels[up]["members"][shown]
    assert box.startswith("run__") and box in page.drawn()
    page.page.locator("#canvas g.node", has=page.page.locator(f"title:text-is('{box}')")).click()
    page.settle()
    details = page.page.inner_text("#details")
    assert "11 x Block" in details and "nodes folded here" in details
    page.page.click("#unfold-box")
    page.settle()
    assert page.state()["level"] > up and box not in page.drawn()
    shot = tmp_path / "large.png"
    page.page.screenshot(path=str(shot))
    assert shot.stat().st_size > 10_000
    if os.environ.get("GRAPHTOOL_ARTIFACTS"):
        Path(os.environ["GRAPHTOOL_ARTIFACTS"]).mkdir(parents=True, exist_ok=True)
        (Path(os.environ["GRAPHTOOL_ARTIFACTS"]) / "large_report.png").write_bytes(shot.read_bytes())
    assert page.errors == []
