"""What ``graphtool bench`` tells the user (issue 14): noisy timings flagged, compiling shown as its own
phase, torch's warnings kept out unless --debug, no mode the user asked for dropped, numbers never cut.

Views are built from hand-made reports (no torch); behaviour runs the real command on the CPU.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from graphtool.analysis.bench_report import BenchReport, ModeReport
from graphtool.analysis.timing_stats import speedup, summarize
from graphtool.render.bench import bench_view
from tests.helpers import example
from tests.helpers.console import render_text

ROOT = Path(__file__).resolve().parents[2]
FAST = ("--iters", "2", "--repeat", "2", "--warmup", "0")


def _report(*modes: tuple[str, list[float] | None, str, str | None], memory: bool = False) -> BenchReport:
    eager = summarize(modes[0][1])
    built = []
    for name, samples, status, reason in modes:
        stats = summarize(samples) if samples else None
        mem = 48_234_496 if memory and stats else None
        built.append(ModeReport(name, status, reason, stats, speedup(eager, stats), 0.0 if stats else None, mem,
                                6_291_456 if memory and name == "cudagraph replay" else None))
    return BenchReport("examples/mlp.py", "get_model_and_inputs", "cuda:0" if memory else "cpu", "0.1.0", "2.13.0",
                       {"machine": "x86_64", "cpus": 2, "python": "3.12.3"}, True, 10, 100, 3, tuple(built), None)


NOISY = _report(("eager", [0.0211, 0.0208, 0.0230], "ok", None),  # 10.4%
                ("compile[default]", [0.0393, 0.0376, 0.5000], "ok", None),  # 1176.6%
                ("compile[aot_eager]", [0.0300, 0.0301, 0.0302], "ok", None))  # 0.7%: steady
STEADY = _report(("eager", [2.4113, 2.3987, 2.4502], "ok", None), ("cudagraph replay", [0.9121, 0.9088, 0.9342], "ok", None),
                 ("compile[reduce-overhead]", [1.1204, 1.1187, 1.1562], "ok", None), memory=True)


# ---- spread above 5%: a warning in the table and in JSON ----


@pytest.mark.parametrize("width", [80, 120])
def test_a_noisy_spread_is_flagged_with_what_to_do(width):
    text = " ".join(render_text(bench_view(NOISY), width).split())  # joined: the warning may wrap at 80
    assert "10.4% !" in text and "1176.6% !" in text and "0.7% !" not in text
    assert "warning: the repeats disagree by more than 5% (eager 10.4%, compile[default] 1176.6%)" in text
    assert "raise --iters (now 100) or --repeat (now 3), or run on a quieter machine" in text


def test_steady_timings_carry_no_warning():
    assert "warning" not in render_text(bench_view(STEADY), 120) and STEADY.to_dict()["warnings"] == []


def test_json_says_which_modes_are_noisy_and_why():
    doc = NOISY.to_dict()
    assert [m["noisy"] for m in doc["modes"]] == [True, True, False]
    assert doc["settings"]["spread_limit_pct"] == 5.0
    assert len(doc["warnings"]) == 1 and "compile[default] 1176.6%" in doc["warnings"][0]


def test_the_json_with_warnings_validates_against_the_schema():
    from importlib import resources

    import jsonschema

    schema = json.loads(resources.files("graphtool.schema").joinpath("bench.schema.json").read_text())
    jsonschema.validate(NOISY.to_dict(), schema)


# ---- the table at 80 columns: no number or header cut ----


@pytest.mark.parametrize("report", [NOISY, STEADY], ids=["cpu", "cuda"])
def test_no_number_or_header_is_cut_at_80_columns(report):
    text = render_text(bench_view(report), 80)
    assert "…" not in text
    for m in report.modes:
        assert m.name in text and f"{m.stats.median_ms:.4f}" in text and f"{m.speedup:.2f}x" in text
    for header in ("mode", "status", "median ms", "spread", "speedup"):
        assert header in text
    assert "examples/mlp.py (timed: forward + backward" in text


def test_dropped_columns_are_named_and_come_back_when_wide():
    narrow, wide = render_text(bench_view(STEADY), 80), render_text(bench_view(STEADY), 120)
    assert "min-max ms" not in narrow.split("└")[0] and "not shown" in narrow
    for header in ("min-max ms", "peak MiB", "pool MiB"):
        assert header in wide
    assert "2.3987-2.4502" in wide and "46.0" in wide and "6.0" in wide


# ---- behaviour: phases, torch's warnings, every mode asked for ----


class Log:
    def __init__(self):
        self.events: list[str] = []

    def phase(self, text):
        self.events.append(f"phase {text}")

    def advance(self, done, total, text):
        self.events.append(f"advance {text}")

    def note(self, text):
        self.events.append(f"note {text}")


def test_compiling_is_its_own_phase_between_the_timed_modes():
    """The bar used to read 'timing eager' (or 0/300) all the while torch.compile worked."""
    from graphtool.commands.bench import bench

    log = Log()
    bench(example("mlp.py"), compile_mode="aot_eager", iters=2, repeat=1, warmup=0, progress=log)
    compiling = next(i for i, e in enumerate(log.events) if e.startswith("phase compiling compile[aot_eager]"))
    assert log.events[compiling - 1] == "advance timing eager"
    assert log.events[compiling + 1] == "advance timing compile[aot_eager]"


def _bench_child(*args: str, debug: bool = False) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "120"}
    env.pop("GRAPHTOOL_DEBUG", None)
    return subprocess.run([sys.executable, "-m", "graphtool", *(["--debug"] if debug else []), "bench", *args], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=300)


@pytest.mark.slow  # over 8 s: the slow tier (docs/ci.md)
def test_torchs_warnings_stay_out_unless_debug():
    """item_branch.py breaks the graph at .item(): dynamo logs a 13-line warning on stderr per run."""
    args = (str(example("item_branch.py")), "--compile", "aot_eager", *FAST)
    quiet = _bench_child(*args)
    assert quiet.returncode == 0, quiet.stderr
    assert "Graph break" not in quiet.stderr and "torch/_dynamo" not in quiet.stderr
    loud = _bench_child(*args, debug=True)
    assert loud.returncode == 0 and "Graph break from `Tensor.item()`" in loud.stderr


def test_reduce_overhead_on_the_cpu_runs_and_says_it_has_no_cuda_graphs(cli):
    rc, out, _ = cli("bench", example("mlp.py"), "--compile", "reduce-overhead", *FAST, "--format", "json")
    mode = json.loads(out)["modes"][1]
    assert rc == 0 and mode["name"] == "compile[reduce-overhead]" and mode["status"] == "ok"
    assert mode["median_ms"] is not None and "ran without CUDA graphs" in mode["reason"]


def test_every_mode_cudagraphs_asks_for_gets_a_row_without_cuda(cli, monkeypatch):
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    rc, out, err = cli("bench", example("mlp.py"), "--cudagraphs", "--compile", "aot_eager", *FAST, "--format", "json")
    modes = {m["name"]: m for m in json.loads(out)["modes"]}
    assert rc == 2 and "no CUDA device is present" in err
    assert list(modes) == ["eager", "compile[aot_eager]", "cudagraph replay", "compile[reduce-overhead]"]
    assert modes["compile[reduce-overhead]"]["status"] == "skipped"
    assert "reduce-overhead" in modes["compile[reduce-overhead]"]["reason"]


# ---- what reduce-overhead leaves on the table against the whole-step graph (issue 22) ----

H100_TRANSFORMER = _report(("eager", [5.21], "ok", None), ("cudagraph replay", [0.379], "ok", None),
                           ("compile[reduce-overhead]", [1.47], "ok", None), memory=True)


def test_the_insight_says_what_reduce_overhead_leaves_on_the_table_and_why():
    """The H100's numbers for the 2-layer transformer, forward + backward: reduce-overhead 1.47 ms against
    0.379 ms for the whole step as one graph."""
    (insight,) = H100_TRANSFORMER.insights()
    assert insight["code"] == "reduce_overhead_gap" and insight["ratio"] == 3.88
    assert insight["left_on_table_ms"] == pytest.approx(1.091)
    for why in ("checks its guards", "cudagraph trees checks", "partitions", "eager gaps between compiled regions",
                "autograd's engine"):
        assert why in insight["text"], why
    text = " ".join(render_text(bench_view(H100_TRANSFORMER), 100).split())
    assert "insight: compile[reduce-overhead] takes 1.47 ms per forward + backward step against 0.379 ms" in text
    assert H100_TRANSFORMER.to_dict()["insights"] == [insight]


def test_no_insight_without_both_graphs_and_a_small_gap_says_so():
    assert NOISY.insights() == []
    close = _report(("eager", [2.0], "ok", None), ("cudagraph replay", [1.0], "ok", None),
                    ("compile[reduce-overhead]", [1.03], "ok", None))
    assert "leaves almost nothing on the table" in close.insights()[0]["text"]


def test_the_report_json_with_random_ops_and_insights_validates():
    from dataclasses import replace
    from importlib import resources

    import jsonschema

    schema = json.loads(resources.files("graphtool.schema").joinpath("bench.schema.json").read_text())
    random_ops = {"drawn": {"bernoulli_": "m.py:12"}, "check": "dropout off", "turned_off": ["dropout functions called with p=0"],
                  "still_drawn": {}}
    jsonschema.validate(replace(H100_TRANSFORMER, random_ops=random_ops).to_dict(), schema)
