"""Every command runs the user's script once (issue 33, "load once").

The fixture (tests/fixtures/load_once/counted.py) appends its process id to the file named by
``GRAPHTOOL_COUNT_LOADS`` each time its module body runs; each command runs in this process through
the CLI (the ``cli`` fixture) and the test counts the lines. The stand-in, the host-value replay
(``:host_read``, whose ``.item()`` the meta stand-in cannot answer), ``--bench`` and report's two traces
all derive from that one run (graphtool/capture/load_once.py).

Once per process, and once per rank: ``lint`` runs each script in a child process of its own (the
parent never imports it); ``--ddp`` checks the other ranks by building rank 1's model as rank 1's
process would (its script may read its rank), so the script runs once for each rank the report says
it built (``ddp.ranks.built``), and once more for a rank it traces because its model differs from
rank 0's (not this fixture's case). Where a command still runs a script twice on purpose,
graphtool/capture/load_once.py says why (a ``--device`` other than the script's own for bench's
timings, a model Python cannot copy).
"""

from __future__ import annotations

import json
import os
from collections import Counter
from pathlib import Path

import pytest

FIXTURE = str(Path(__file__).resolve().parents[1] / "fixtures" / "load_once" / "counted.py")
HOST_READ = f"{FIXTURE}:host_read"
SLOW = pytest.mark.slow  # over 5 s each: the slow tier (docs/ci.md)


@pytest.fixture
def runs(cli, tmp_path, monkeypatch):
    """``rc, out, runs = runs(*args)``: the command's exit code, stdout and the script's runs per process id."""

    def _run(*args):
        counter = tmp_path / "runs.txt"
        counter.unlink(missing_ok=True)
        monkeypatch.setenv("GRAPHTOOL_COUNT_LOADS", str(counter))
        rc, out, err = cli(*[a.replace("{tmp}", str(tmp_path)) for a in args])
        pids = counter.read_text().split() if counter.exists() else []
        return rc, out, err, Counter(int(p) for p in pids)

    return _run


def _once_here(counts: Counter) -> bool:
    return counts == Counter({os.getpid(): 1})


# (arguments, exit code): each command and the flags that add a trace; the cheapest in the default tier
IN_PROCESS = [
    pytest.param(("trace", HOST_READ, "--cudagraphs", "inductor", "--bench"), 0, id="trace-cudagraphs-bench-replay"),
    pytest.param(("report", HOST_READ, "-o", "{tmp}/r.html"), 0, id="report-replay", marks=SLOW),
    pytest.param(("cudagraphs", HOST_READ), 0, id="cudagraphs-replay"),
    pytest.param(("trace", FIXTURE), 0, id="trace", marks=SLOW),
    pytest.param(("trace", FIXTURE, "--cudagraphs", "cudagraphs", "--inference"), 0, id="trace-cudagraphs-inference",
                 marks=SLOW),
    pytest.param(("trace", FIXTURE, "--bench"), 0, id="trace-bench", marks=SLOW),
    pytest.param(("trace", FIXTURE, "--fsdp2", "--cudagraphs", "inductor", "--bench"), 0, id="trace-fsdp2-cudagraphs-bench",
                 marks=SLOW),
    pytest.param(("mutations", FIXTURE), 0, id="mutations", marks=SLOW),
    pytest.param(("devices", HOST_READ), 0, id="devices-replay", marks=SLOW),
    pytest.param(("devices", FIXTURE, "--inference"), 0, id="devices-inference", marks=SLOW),
    pytest.param(("cudagraphs", FIXTURE, "--dynamic", "--steps", "2"), 0, id="cudagraphs-dynamic-steps", marks=SLOW),
    pytest.param(("cudagraphs", FIXTURE, "--ddp"), 0, id="cudagraphs-ddp", marks=SLOW),
    pytest.param(("cudagraphs", FIXTURE, "--fsdp2"), 0, id="cudagraphs-fsdp2", marks=SLOW),
    pytest.param(("memory", FIXTURE), 0, id="memory", marks=SLOW),
    pytest.param(("memory", FIXTURE, "--dynamic"), 0, id="memory-dynamic", marks=SLOW),
    pytest.param(("memory", FIXTURE, "--ddp"), 0, id="memory-ddp", marks=SLOW),
    pytest.param(("memory", FIXTURE, "--fsdp2"), 0, id="memory-fsdp2", marks=SLOW),
    pytest.param(("memory", FIXTURE, "--fit", "24GiB", "--budgets", "1,0.5"), 0, id="memory-fit", marks=SLOW),
    pytest.param(("report", FIXTURE, "--fit", "24GiB", "--budgets", "1,0.5", "-o", "{tmp}/r.html"), 0, id="report-fit",
                 marks=SLOW),
    # a schedule of sizes and the advice, each piece checked by predicting again on a stand-in of the one load
    pytest.param(("shapes", FIXTURE, "--sizes", "x:0=4,6,4,6"), 0, id="shapes-advice", marks=SLOW),
    pytest.param(("cudagraphs", FIXTURE, "--schedule"), 0, id="cudagraphs-schedule", marks=SLOW),
    pytest.param(("memory", FIXTURE, "--schedule"), 0, id="memory-schedule", marks=SLOW),
    pytest.param(("report", FIXTURE, "--schedule", "-o", "{tmp}/r.html"), 0, id="report-schedule", marks=SLOW),
    pytest.param(("render", FIXTURE, "-o", "{tmp}/a.dot"), 0, id="render-autograd", marks=SLOW),
    pytest.param(("render", HOST_READ, "--graph", "joint", "-o", "{tmp}/j.dot"), 0, id="render-joint-replay", marks=SLOW),
    pytest.param(("report", FIXTURE, "--inference", "--no-memory", "-o", "{tmp}/r.html"), 0, id="report-inference",
                 marks=SLOW),
    pytest.param(("report", FIXTURE, "--ddp", "-o", "{tmp}/r.html"), 0, id="report-ddp", marks=SLOW),
    pytest.param(("report", FIXTURE, "--fsdp2", "-o", "{tmp}/r.html"), 0, id="report-fsdp2", marks=SLOW),
    pytest.param(("bench", FIXTURE, "--iters", "2", "--repeat", "1", "--warmup", "0"), 0, id="bench", marks=SLOW),
    # without a GPU, --cudagraphs exits 2 after eager and compiled were timed; its verdict traced the stand-in
    pytest.param(("bench", FIXTURE, "--cudagraphs", "--iters", "2", "--repeat", "1", "--warmup", "0"), None,
                 id="bench-cudagraphs", marks=SLOW),
]


@pytest.mark.parametrize(("args", "code"), IN_PROCESS)
def test_a_command_runs_the_script_once(runs, args, code):
    rc, _, err, counts = runs(*args)
    assert rc == code if code is not None else rc in (0, 2), err
    assert _once_here(counts), f"{' '.join(args[:1] + args[2:])}: the script ran {dict(counts)} times (pid: runs)"


@SLOW
def test_ddp_runs_the_script_once_per_rank_it_builds(runs):
    """Rank 0's model serves the trace, the stand-in and the bench; rank 1's is built as its process would
    build it, so the script runs once for each rank the report lists as built."""
    rc, out, err, counts = runs("trace", FIXTURE, "--ddp", "--cudagraphs", "inductor", "--bench", "--format", "json")
    assert rc == 0, err
    built = json.loads(out)["ddp"]["ranks"]["built"]
    assert counts == Counter({os.getpid(): len(built)}), (built, dict(counts))


@SLOW
@pytest.mark.parametrize("flags", [(), ("--dynamic",), ("--ddp",)], ids=["plain", "dynamic", "ddp"])
def test_lint_runs_the_script_once_in_its_child(runs, flags):
    """lint imports each script in a child process of its own, once; the parent never imports it."""
    rc, _, err, counts = runs("lint", FIXTURE, *flags)
    assert rc == 0, err
    assert list(counts.values()) == [1] and os.getpid() not in counts, dict(counts)
