"""``graphtool diff`` across two torch releases: the same script's trace documents made under each torch (each with
``--coverage``), diffed, say exactly the difference of torch's own counters in each.

The script (tests/fixtures/diff/torch_versions.py) is one the two tested torches compile differently: 2.13 breaks
the graph at ``ContextVar.get()`` and at a ``SimpleNamespace`` and runs the rest eagerly, 2.15 traces it whole.
(The bundled examples compile the same on both: their diff would only check agreement.)

The other torch's python comes from ``GRAPHTOOL_OTHER_TORCH_PYTHON``: in CI, stage 3 (torch 2.15) points it at the
checkout's own ``.venv/bin/python`` (torch 2.13) and sets ``GRAPHTOOL_REQUIRE_OTHER_TORCH=1``, which turns a skip
into a failure. Locally, from the pinned torch::

    GRAPHTOOL_OTHER_TORCH_PYTHON=/root/.cache/graphtool/venvs/torch-2.15.0/bin/python \\
        .venv/bin/python -m pytest -n 0 -m slow tests/truth/test_torch_versions_diff.py
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest

from tests.helpers import FIXTURES, ROOT

SCRIPT = str(FIXTURES / "diff" / "torch_versions.py")
OTHER = "GRAPHTOOL_OTHER_TORCH_PYTHON"


def _other_python() -> str:
    python = os.environ.get(OTHER)
    why = None
    if not python:
        why = f"{OTHER} is not set (the python of a second torch; .ci/run sets it for stage 3)"
    elif not os.access(python, os.X_OK):
        why = f"{OTHER}={python} is not an executable"
    if why is None:
        return python
    if os.environ.get("GRAPHTOOL_REQUIRE_OTHER_TORCH") == "1":
        pytest.fail(f"GRAPHTOOL_REQUIRE_OTHER_TORCH=1 but {why}")
    pytest.skip(why)


def _side(python: str, doc: str) -> dict:
    """``torch_side.py`` under ``python`` (this process's torch: in this process), this checkout's graphtool first
    on its path."""
    if python == sys.executable:
        from tests.truth.torch_side import collect

        return {**collect(SCRIPT, doc), "doc": doc}
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    proc = subprocess.run([python, str(ROOT / "tests" / "truth" / "torch_side.py"), SCRIPT, doc], capture_output=True,
                          text=True, env=env, cwd=str(ROOT), timeout=600)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return {**json.loads(proc.stdout.strip().splitlines()[-1]), "doc": doc}


def _version(v: str) -> tuple:
    return tuple(int(x) for x in re.findall(r"\d+", v.split("+")[0])[:3])


@pytest.mark.slow  # two subprocesses, each importing its torch and tracing the script
def test_the_diff_of_two_torches_is_the_difference_of_their_counters(tmp_path, cli):
    other = _other_python()
    sides = sorted((_side(sys.executable, str(tmp_path / "this.json")), _side(other, str(tmp_path / "other.json"))),
                   key=lambda s: _version(s["torch"]))
    old, new = sides
    assert _version(old["torch"]) < _version(new["torch"]), "two different torches"
    rc, out, err = cli("diff", old["doc"], new["doc"], "--format", "json", "--fail-on", "new-breaks,coverage")
    d = json.loads(out)
    m = d["models"][0]
    assert d["torch"] == {"before": old["torch"], "after": new["torch"]}
    # each side is its torch's counters, so the change is the difference of the counters
    assert (m["calls_captured"]["before"], m["calls_captured"]["after"]) == (old["calls_captured"], new["calls_captured"])
    assert (m["fallbacks_to_eager"]["before"], m["fallbacks_to_eager"]["after"]) == (old["fallbacks_to_eager"], new["fallbacks_to_eager"])
    breaks = m["graph_breaks"]
    assert breaks["after"] - breaks["before"] == new["graph_breaks"] - old["graph_breaks"]  # one break per site here
    assert len(breaks["added"]) - len(breaks["removed"]) == new["graph_breaks"] - old["graph_breaks"]
    for side, counted in (("before", old), ("after", new)):
        cov = m["coverage"][side]
        assert cov["settings"][0]["calls_captured"] == counted["calls_captured"] == cov["settings"][0]["in_graphs"]
        assert cov["settings"][0]["graphs"] == counted["unique_graphs"]
    if (_version(old["torch"])[:2], _version(new["torch"])[:2]) == ((2, 13), (2, 15)):
        # what the script was written to show: 2.15 traces what 2.13 broke at, and captures every call
        assert [b["code"] for b in breaks["removed"]] == ["gb0156", "gb0147"] and breaks["added"] == []
        assert (old["calls_captured"], new["calls_captured"]) == (2, 5)
        assert (m["coverage"]["before"]["share"], m["coverage"]["after"]["share"]) == (0.4, 1.0)
        assert rc == 0 and d["passed"], err  # nothing got worse going up
        rc, _, _ = cli("diff", new["doc"], old["doc"], "--fail-on", "new-breaks,coverage")
        assert rc == 1  # and going down fails the gate
