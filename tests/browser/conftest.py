"""Real reports opened in headless Chromium: Debian's ``chromium`` driven by playwright.

playwright's own browser downloads are never used: the system executable is passed by path
(``GRAPHTOOL_CHROMIUM`` overrides it). Without chromium or playwright the tests skip and say why;
``.ci/run`` installs both and sets ``GRAPHTOOL_REQUIRE_BROWSER=1``, which turns a skip into a failure.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from tests.helpers import FIXTURES, example

SCREENSHOTS = Path(os.environ.get("GRAPHTOOL_ARTIFACTS", "")) if os.environ.get("GRAPHTOOL_ARTIFACTS") else None


def _chromium() -> str | None:
    explicit = os.environ.get("GRAPHTOOL_CHROMIUM")
    if explicit:
        return explicit
    return next((p for p in (shutil.which(n) for n in ("chromium", "chromium-browser", "google-chrome")) if p), None)


def _unavailable(why: str):
    if os.environ.get("GRAPHTOOL_REQUIRE_BROWSER") == "1":
        pytest.fail(f"GRAPHTOOL_REQUIRE_BROWSER=1 but {why}")
    pytest.skip(why)


@pytest.fixture(scope="session")
def browser():
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        _unavailable("playwright is not installed (pip install playwright; it drives the system chromium)")
    exe = _chromium()
    if exe is None:
        _unavailable("no chromium executable (apt-get install chromium, or set GRAPHTOOL_CHROMIUM)")
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=exe, args=["--no-sandbox", "--disable-gpu"])
        yield b
        b.close()


@pytest.fixture(scope="session")
def report_files(tmp_path_factory):
    """``name -> path`` of real reports, written once per session by the CLI itself."""
    from graphtool.cli.main import run

    folder = tmp_path_factory.mktemp("reports")
    made = {}
    for name in ("cpu_roundtrip", "transformer"):
        out = folder / f"{name}.html"
        rc = run(["report", example(f"{name}.py"), "-o", str(out), "--no-memory"])
        assert rc == 0, f"graphtool report {name} exited {rc}"
        made[name] = out
    return made


@pytest.fixture(scope="session")
def phi_report(tmp_path_factory):
    """The report of a tiny transformers Phi trained on labels (tests/fixtures/pictures/phi_train.py)."""
    pytest.importorskip("transformers")
    from graphtool.cli.main import run

    out = tmp_path_factory.mktemp("phi") / "phi_train.html"
    rc = run(["report", str(FIXTURES / "pictures" / "phi_train.py"), "-o", str(out)])
    assert rc == 0, f"graphtool report phi_train exited {rc}"
    return out


class Page:
    """A report opened in a fresh page, collecting console errors and uncaught exceptions."""

    def __init__(self, browser, path: Path):
        self.errors: list[str] = []
        self.page = browser.new_page(viewport={"width": 1400, "height": 1000})
        self.page.on("console", lambda m: self.errors.append(m.text) if m.type == "error" else None)
        self.page.on("pageerror", lambda e: self.errors.append(str(e)))
        self.page.goto(path.as_uri())
        self.page.wait_for_selector("#canvas svg g.node")
        self.settle()

    def eval(self, js: str, arg=None):
        return self.page.evaluate(js, arg)

    def selected(self) -> list[str]:
        return self.eval("() => Array.from(document.querySelectorAll('#canvas g.node.selected')).map(g => g.querySelector('title').textContent)")

    def drawn(self) -> set[str]:
        return set(self.eval("() => Array.from(document.querySelectorAll('#canvas g.node')).map(g => g.querySelector('title').textContent)"))

    def state(self) -> dict:
        return self.eval("() => ({pic: window.graphtoolViewer.state.pic, level: window.graphtoolViewer.state.level})")

    def data(self) -> dict:
        """The viewer's data, node facts and fold membership unpacked."""
        return self.eval("() => window.graphtoolViewer.data")

    def settle(self) -> None:
        """Wait until the viewer has finished every step a click or key started."""
        self.page.wait_for_timeout(50)  # a debounced search starts 150 ms after typing: Enter is used instead
        self.page.wait_for_function("() => window.graphtoolViewer && window.graphtoolViewer.idle()")


@pytest.fixture
def open_report(browser):
    pages = []

    def _open(path: Path) -> Page:
        p = Page(browser, path)
        pages.append(p)
        return p

    yield _open
    for p in pages:
        p.page.close()
