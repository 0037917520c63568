"""``import graphtool`` stays light: no torch, no rich, under 0.1 s; the API loads on first use."""

from __future__ import annotations

import re
import subprocess
import sys


def test_import_graphtool_takes_under_a_tenth_of_a_second_and_imports_no_torch():
    code = "import graphtool, sys; print(sorted(m for m in ('torch', 'rich', 'typer') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-X", "importtime", "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
    # the cumulative microseconds of the line that imports graphtool itself
    (line,) = [ln for ln in out.stderr.splitlines() if re.search(r"\|\s+graphtool$", ln)]
    cumulative_us = int(line.split("|")[1])
    assert cumulative_us < 100_000, line


def test_the_public_names_resolve_lazily_and_render_is_both_package_and_function():
    code = ("import graphtool, sys; assert 'graphtool.api' not in sys.modules; "
            "f = graphtool.trace; assert 'graphtool.api' in sys.modules and f.__module__ == 'graphtool.api'; "
            "import graphtool.render.dot; assert callable(graphtool.render) and graphtool.render.dot.to_dot; "
            "assert graphtool.testing.assert_no_graph_breaks; print('ok')")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.stdout.strip() == "ok", out.stderr
