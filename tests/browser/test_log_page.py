"""``graphtool log -o page.html`` in a real browser: report's viewer draws each compile's AOT graphs read back from
the log, a click on a node shows its facts, and the forward's saved tensor links to the backward that reads it."""

from __future__ import annotations

import pytest

from tests.log.recorded import DDP_213

pytestmark = pytest.mark.slow  # a browser session (the page itself is made in a second)


@pytest.fixture(scope="module")
def log_page(tmp_path_factory):
    from graphtool.cli.main import run

    out = tmp_path_factory.mktemp("log") / "log.html"
    assert run(["log", str(DDP_213 / "trace"), "-o", str(out), "--format", "json"]) == 0
    return out


def test_the_log_page_draws_every_compile_and_shows_a_nodes_facts(open_report, log_page):
    page = open_report(log_page)
    assert page.errors == []
    assert "ranks out of step (desync)" in page.page.inner_text("#summary")
    tabs = page.page.locator(".tab")
    assert tabs.count() == 6
    tabs.nth(0).click()
    page.settle()
    facts = page.data()["pictures"][0]["facts"]
    assert facts["addmm"]["op"] == "aten.addmm.default" and facts["addmm"]["source"].endswith("record.py:45")
    assert facts["primals_3"]["shape"] == [2, 8] and facts["primals_3"]["saved"] == "saved for backward"
    page.page.locator("#canvas g.node", has_text="addmm").first.click()
    page.settle()
    assert page.page.inner_text("#details h3") == "addmm"
    tabs.nth(1).click()  # the same compile's backward
    page.settle()
    assert page.state()["pic"] == 1 and page.drawn()
    assert page.errors == []
