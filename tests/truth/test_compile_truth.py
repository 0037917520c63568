"""graphtool compile against torch itself:

- the phases add up to torch's own totals for the same process (``calculate_time_spent``), within 5%, on every
  torch CI runs: the phases come from the child's TORCH_TRACE log, the totals from the child's own process;
- the repeated blocks are the modules whose dynamo graphs hash equal when compiled one by one (dynamo reset before
  each, the graph's readable code with its shapes hashed): graphtool's probe compiles them in order without a reset
  and reads which graphs ran, a different method;
- the regional/whole ratio is within 25% of an independent measurement of the same two compiles in fresh processes
  with torch alone (tests/truth/compile_ratio.py), on a transformers decoder, in CPU
  seconds: on a shared 2-core machine one compile's wall time moved 5.9 -> 10.4 s between two runs, its CPU time
  1.72 -> 1.71 s (with one OpenMP thread: spinning threads burn CPU time while they wait).
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from graphtool.commands.compile import compile_model

pytestmark = pytest.mark.slow  # real compiles in fresh processes (docs/ci.md)

FIXTURES = Path(__file__).parent.parent / "fixtures" / "compile"


@pytest.fixture(scope="module")
def mlp_inductor():
    """One real inductor compile (caches on in an empty private folder), then --warm's second process; under an
    environment that turns the FX graph cache off (as a CI runner may: --warm then measured two cold compiles)."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("TORCHINDUCTOR_FX_GRAPH_CACHE", "0")
        return compile_model("examples/mlp.py", steps=1, warm=True).report


def test_phases_add_up_to_torchs_own_totals(mlp_inductor):
    full = mlp_inductor.full
    totals = full.torch_totals
    phases = sum(full.phases().values())
    assert phases == pytest.approx(totals["total_wall_time"], rel=0.05)
    kinds = full.by_kind()
    assert kinds["forward"] == pytest.approx(totals["entire_frame_compile"], rel=0.05)
    assert kinds["backward"] == pytest.approx(totals["entire_backward_compile"], rel=0.05)
    p = full.phases()
    assert p["inductor"] + p["code_gen"] + p["triton"] > 0 and p["dynamo"] > 0 and p["aot_autograd"] > 0
    assert full.seconds >= 0.9 * phases  # the first call waited for the compile (and ran the step)


def test_warm_hits_inductors_caches(mlp_inductor):
    cold, warm = mlp_inductor.full.cache(), mlp_inductor.warm.cache()
    assert cold["fx_graph_misses"] >= 1 and cold["fx_graph_hits"] == 0
    assert warm["fx_graph_hits"] >= 1 and warm["fx_graph_misses"] == 0
    assert mlp_inductor.warm.compile_seconds < mlp_inductor.full.compile_seconds


def _one_by_one(model, fqns, calls) -> dict[str, str]:
    """Each instance compiled alone after a reset; the hash of its dynamo graph's readable code (shapes included)."""
    out = {}
    for fqn in fqns:
        torch._dynamo.reset()
        graphs: list[str] = []

        def keep(gm, example_inputs, graphs=graphs):
            graphs.append(gm.print_readable(print_output=False))
            return gm.forward

        args, kwargs = calls[fqn]
        torch.compile(model.get_submodule(fqn), backend=keep)(*args, **kwargs)
        out[fqn] = hashlib.sha1("\n".join(graphs).encode()).hexdigest()
    torch._dynamo.reset()
    return out


@pytest.mark.parametrize("script", ["stack8.py", "near_miss.py", "decoder.py"])
def test_repeated_blocks_are_the_modules_whose_graphs_hash_equal(script):
    from graphtool.analysis.repeated_blocks import judge_blocks
    from graphtool.capture.compile_regions import FirstCalls, candidate_groups, module_facts, probe_group
    from graphtool.capture.user.script import load_model

    spec = load_model(str(FIXTURES / script))
    model = spec.model
    (group,) = [g for g in candidate_groups(model) if g.nested_in is None]
    modules = {f: model.get_submodule(f) for f in group.fqns}
    with FirstCalls(modules) as calls:
        model(*spec.args, **spec.kwargs)
    raw = {"class": group.cls, "fqns": list(group.fqns), "probe": probe_group(torch, modules, calls.calls),
           "facts": {f: module_facts(m) for f, m in modules.items()}}
    (found,) = judge_blocks([raw], [])
    hashes = _one_by_one(model, group.fqns, calls.calls)
    by_hash: dict[str, list[str]] = {}
    for fqn, h in hashes.items():
        by_hash.setdefault(h, []).append(fqn)
    largest = max(by_hash.values(), key=len)
    assert found.identical and list(found.fqns) == largest
    assert sorted(f for m in found.near_misses for f in m.fqns) == sorted(f for f in group.fqns if f not in largest)


def _independent(script: Path, how: str, backend: str, blocks: str) -> float:
    proc = subprocess.run([sys.executable, str(Path(__file__).parent / "compile_ratio.py"), str(script), how, backend, blocks],
                          capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])["cpu"]


@pytest.mark.one_torch  # the compiles are torch's; what is checked is graphtool's clock against a plain one
# the transformers decoder only: stack8.py's compiles take ~1 s of CPU each, where two runs of the same plain
# measurement gave ratios of 0.65 and 0.99 (a loaded CI machine): too little signal for a 25% tolerance
@pytest.mark.parametrize("script, blocks", [("decoder.py", "model.layers")])
def test_the_regional_ratio_matches_an_independent_measurement(script, blocks, monkeypatch):
    monkeypatch.setenv("OMP_NUM_THREADS", "1")  # graphtool's children and the plain script alike (CI's workers set it)
    backend = "aot_eager"  # dynamo and AOT autograd, where regional compilation saves: seconds, not minutes, in CI
    # CPU seconds only grow when the other xdist worker shares the cores (CI's clean clone once saw 0.53 against
    # 0.37 where a quiet machine gives 0.40 and 0.40 three times over): each quantity is the least of its samples,
    # as timeit takes the minimum, and a round is added (three at most) while the two ratios disagree
    samples: dict[str, list[float]] = {"ours regional": [], "ours whole": [], "theirs regional": [], "theirs whole": []}
    for _ in range(3):
        report = compile_model(str(FIXTURES / script), backend=backend, regional=True, steps=1).report
        samples["ours regional"].append(report.regional.cpu_seconds)
        samples["ours whole"].append(report.full.cpu_seconds)
        for how in ("regional", "whole"):
            samples[f"theirs {how}"].append(_independent(FIXTURES / script, how, backend, blocks))
        ours = min(samples["ours regional"]) / min(samples["ours whole"])
        theirs = min(samples["theirs regional"]) / min(samples["theirs whole"])
        if ours == pytest.approx(theirs, rel=0.25):
            break
    assert ours == pytest.approx(theirs, rel=0.25), (ours, theirs, samples)
