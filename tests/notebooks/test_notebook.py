"""examples/notebook.ipynb executed in a real Jupyter kernel: each result shows as HTML, self-contained."""

from __future__ import annotations

import html
import re

import pytest

from tests.helpers import EXAMPLES

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")
pytest.importorskip("ipykernel")


@pytest.fixture(scope="module")
def executed(tmp_path_factory):
    nb = nbformat.read(EXAMPLES / "notebook.ipynb", as_version=4)
    folder = tmp_path_factory.mktemp("notebook")
    with pytest.MonkeyPatch.context() as mp:  # the kernel's own inductor cache: never one another xdist worker writes
        mp.setenv("TORCHINDUCTOR_CACHE_DIR", str(folder / "inductor-cache"))
        nbclient.NotebookClient(nb, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(folder)}}).execute()
    return nb


def _html(cell) -> str:
    (html_output,) = [o["data"]["text/html"] for o in cell.outputs if "text/html" in o.get("data", {})]
    return html_output


def _page(frame: str) -> str:
    """The page inside an output's ``<iframe srcdoc>``."""
    m = re.fullmatch(r'<iframe class="graphtool" srcdoc="([^"]*)".*</iframe>', frame, re.S)
    assert m, frame[:200]
    return html.unescape(m.group(1))


@pytest.mark.slow
def test_each_result_shows_as_a_self_contained_html_view_with_a_text_fallback(executed):
    cells = [c for c in executed.cells if c.cell_type == "code"]
    extra = [(i, [o.get("text") or sorted(o.get("data", {})) for o in c.outputs]) for i, c in enumerate(cells) if i and len(c.outputs) != 1]
    assert not extra, f"one output per cell (the rich console must not display on its own): {extra}"
    verdict = _page(_html(cells[1]))
    assert "<h2>CUDA graphs" in verdict and "CG011" in verdict and "mutated inputs" in verdict
    text = cells[1].outputs[0]["data"]["text/plain"]
    assert text.startswith("CUDA graphs would be skipped with backend inductor: region 0 forward")
    assert cells[2].outputs[0]["data"]["text/plain"] == "(False, ['mutated-input'])"
    mutations = _page(_html(cells[3]))
    assert "<h2>Mutations and aliasing" in mutations and "GT-M001 user input cache mutated in place" in mutations
    assert "cache.add_(1)" in mutations  # the user's line, from the notebook cell
    page = _page(_html(cells[4]))  # the whole report page, with its viewer and pictures
    assert 'id="graphtool-data"' in page and "<h2>CUDA graphs" in page and '"pictures":[{' in page
    for frame_page in (verdict, mutations, page):  # nothing fetched: no external script, style or image
        assert not re.search(r'(src|href)="(https?:)?//', frame_page)
