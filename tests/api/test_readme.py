"""The README's Python example runs as written (a doctest of its first ``python`` block under "From Python")."""

from __future__ import annotations

import doctest

import pytest

from tests.helpers import ROOT

pytest.importorskip("torch")


@pytest.mark.slow
def test_the_readme_python_api_example_runs_as_shown():
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    block = text.split("## From Python", 1)[1].split("```python\n", 1)[1].split("```", 1)[0]
    test = doctest.DocTestParser().get_doctest(block, {}, "README", "README.md", 0)
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    runner.run(test)
    assert runner.summarize(verbose=False) == doctest.TestResults(failed=0, attempted=9)
