"""``trace --ddp`` against real DDP runs: gloo process groups of 2 (and 4) processes on this CPU.

Each rank runs ``DDP(torch.compile(model), bucket_cap_mb=X)`` one step (``models/ddp_rank.py``) and
reports what torch itself says: the graphs its backend was handed, the parameters of each bucket
DDPOptimizer chose, the ``optimize_ddp_split_child`` artifacts on the structured-trace logger and
``counters["graph_break"]``. graphtool predicts the same from one process at the world size asked
(8 included: the prediction is one process whatever the world size). Every rank runs in its own
process group under a deadline, and every group is killed on the way out.

The tests that read the same case (script, bucket cap, find_unused_parameters, world size) share one
real run of it (:func:`shared_run`), made with the most steps any of them needs: a rank reports its
first step's facts as a one-step run would (``models/ddp_rank.py``). Their parameter ids start with
the case (``llama-2MB-ws2``), and ``tests/conftest.py`` keeps the tests of one case on one worker.
"""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

import pytest

from tests.helpers import FIXTURES, preloaded

RANK = Path(__file__).parent / "models" / "ddp_rank.py"
DDP_FIXTURES = FIXTURES / "ddp"
#: a rank that has not finished by then hangs: the whole run fails, every rank killed
RANK_DEADLINE = 240


def run_ranks(script: Path, world: int, cap_mb: float, unused: bool, tmp: Path, steps: int = 1,
              memory: bool = False) -> list[dict]:
    """Run ``world`` real ranks of ``models/ddp_rank.py`` and return each one's report."""
    return spawn_ranks(
        lambda rank, out: [str(RANK), str(script), str(rank), str(world), str(tmp / "store"), str(cap_mb),
                           "1" if unused else "0", out, str(steps)],
        world, tmp, {**os.environ, "GRAPHTOOL_RANK_MEMORY": "1" if memory else "0"})


#: one real run per key in this process: the tests of a case share it (tests/conftest.py keeps them on one worker)
_SHARED: dict[tuple, list[dict]] = {}


def shared(key: tuple, tmp_path_factory, make) -> list[dict]:
    """``make(tmp_dir)`` once per ``key`` in this process (a run that fails is not kept: the next test runs it again)."""
    if key not in _SHARED:
        _SHARED[key] = make(tmp_path_factory.mktemp("ranks"))
    return _SHARED[key]


#: the steps of a case that a one-step test shares with a loop's test: the loop's (a rank reports its first step
#: as a one-step run does)
CASE_STEPS = {("llama.py", 2.0, False, 2): 3, ("llama.py", 1.0, False, 4): 3, ("unused.py", 25.0, True, 2): 2}


def shared_run(tmp_path_factory, script: str, cap_mb: float, unused: bool, world: int, steps: int = 1) -> list[dict]:
    """The real run of one case (``models/ddp_rank.py``, no memory hook), made once and shared by every test
    that reads it. A test of more than one step gets exactly its steps; a one-step test reads the first
    step of the case's run (``CASE_STEPS``)."""
    run_steps = CASE_STEPS.get((script, cap_mb, unused, world), steps)
    assert steps in (1, run_steps), f"{script} {cap_mb} MB ws{world}: a test of {steps} steps shares a run of {run_steps}"
    return shared(("ddp", script, cap_mb, unused, world, run_steps), tmp_path_factory,
                  lambda tmp: run_ranks(DDP_FIXTURES / script, world, cap_mb, unused, tmp, run_steps))


def spawn_ranks(argv, world: int, tmp: Path, env: dict) -> list[dict]:
    """Run ``python *argv(rank, out_json)`` for each of ``world`` ranks, each in its own process group,
    and return each one's JSON report, or fail naming the rank that did not finish; every group is
    killed on the way out. Each rank is forked from a server that has imported torch once
    (``tests/helpers/preloaded.py``: a real process of its own, without the 5-7 s import per rank)."""
    procs = []
    try:
        for rank in range(world):
            procs.append(preloaded.run_script(argv(rank, str(tmp / f"rank{rank}.json")), env, tmp / f"rank{rank}.err"))
        deadline = time.monotonic() + RANK_DEADLINE
        for rank, proc in enumerate(procs):
            proc.join(timeout=max(1.0, deadline - time.monotonic()))
            if proc.exitcode is None:
                pytest.fail(f"rank {rank} of {world} did not finish in {RANK_DEADLINE} s")
            assert proc.exitcode == 0, (tmp / f"rank{rank}.err").read_text()[-2000:]
    finally:
        for proc in procs:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
            if proc.is_alive():  # killed before its setsid: not yet a group of its own
                proc.kill()
            proc.join()
    return [json.loads((tmp / f"rank{rank}.json").read_text()) for rank in range(world)]


#: on the pinned torch only (not ``versions``; docs/ci.md says why for each file): a world-size-4 case whose
#: world-size-2 sibling (the same script in the same test) runs on every torch. Torch's part (what each rank
#: compiles, DDP's buckets and splits, which do not depend on the world size) is checked by the sibling on every
#: release; what 4 adds is graphtool's: its fake process group of 4, its groups of ranks ("ranks 1-3"), the
#: sizes it multiplies or divides by the world size.
ONE_TORCH = pytest.mark.one_torch


def cases(rows, id_of, once=lambda row: row[-1] == 4) -> list:
    """``pytest.param`` per row, id ``id_of(row)``, marked ``ONE_TORCH`` where ``once(row)`` (world size 4)."""
    return [pytest.param(*row, id=id_of(row), marks=[ONE_TORCH] if once(row) else []) for row in rows]


def predict(cli, script: Path, cap_mb: float, world: int, unused: bool = False) -> dict:
    rc, out, err = cli("trace", script, "--ddp", "--world-size", world, "--bucket-cap-mb", cap_mb, "--format", "json",
                       *(["--find-unused-parameters"] if unused else []))
    assert rc == 0, err
    return json.loads(out)


CASES = [
    ("mlp8.py", 1.0, False, 2),
    ("mlp8.py", 25.0, False, 2),
    ("break_mid.py", 1.0, False, 2),
    ("unused.py", 25.0, True, 2),
    ("mlp8.py", 5.0, False, 4),
    ("factory.py", 1.0, False, 2),
    ("compiled_ddp.py", 25.0, False, 2),
    ("compiled_ddp_own_forward.py", 1.0, False, 2),  # torch.compile(DDP(model)) still split: the H200 row too
    ("llama.py", 2.0, False, 2),
    ("llama.py", 1.0, False, 4),
]


@pytest.mark.slow
@pytest.mark.parametrize("script, cap_mb, unused, world", cases(CASES, lambda r: f"{r[0][:-3]}-{r[1]:g}MB-ws{r[3]}"))
def test_predicted_splits_equal_every_rank_of_a_real_gloo_run(cli, tmp_path_factory, script, cap_mb, unused, world):
    ranks = shared_run(tmp_path_factory, script, cap_mb, unused, world)
    # the world size does not enter DDP's split: predict at 8; a factory given the world size builds
    # the model for it, so it is predicted at the real run's
    factory = "get_distributed_model" in (DDP_FIXTURES / script).read_text()
    doc = predict(cli, DDP_FIXTURES / script, cap_mb, world if factory else 8, unused)
    ddp = doc["ddp"]
    split_frames = {g["dynamo_graph"] for g in ddp["graphs"] if g["bucket"] > 0}
    for real in ranks:
        assert real == ranks[0]  # every rank compiled the same graphs
        assert ddp["graph_count"] == real["graphs"] == len(doc["graphs"])
        assert [sorted(g["params"]) for g in ddp["graphs"]] == real["buckets"]
        assert sum(1 for g in ddp["graphs"] if g["dynamo_graph"] in split_frames) == len(real["split_children"])
        assert len(split_frames) == real["split_graphs"]
        # trace lists each break site once; torch counts every time dynamo hits one (torch.compile(DDP)
        # hits the skipped _inside_ddp_forward twice): the sites are its distinct reasons
        assert len(doc["graph_breaks"]) == real["graph_break_reasons"]
        assert real["graph_breaks"] >= real["graph_break_reasons"]


@pytest.mark.slow
@pytest.mark.parametrize("case", ["mlp8-1MB-ws2"])  # the real run of that case, shared with the splits test's
def test_other_bucket_caps_predict_what_a_real_run_at_that_cap_compiles(cli, tmp_path_factory, case):
    doc = predict(cli, DDP_FIXTURES / "mlp8.py", 25.0, 2)
    at = {c["bucket_cap_mb"]: c["graphs"] for c in doc["ddp"]["graphs_at_bucket_cap_mb"]}
    assert at[1.0] == shared_run(tmp_path_factory, "mlp8.py", 1.0, False, 2)[0]["graphs"] == 8


# break_mid-1MB-ws4 has no sibling of 2 here: it runs on every torch
STEP_CASES = [("recompile.py", 1.0, 2), ("recompile.py", 1.0, 4), ("mlp8.py", 5.0, 2), ("break_mid.py", 1.0, 4),
              ("llama.py", 2.0, 2), ("llama.py", 1.0, 4)]


@pytest.mark.slow
@pytest.mark.parametrize("script, cap_mb, world", cases(STEP_CASES, lambda r: f"{r[0][:-3]}-{r[1]:g}MB-ws{r[2]}",
                                                         once=lambda r: r[2] == 4 and r[0] != "break_mid.py"))
def test_cudagraphs_ddp_steps_compile_and_recompile_what_a_real_gloo_loop_does(cli, tmp_path_factory, script, cap_mb, world):
    """``cudagraphs --ddp`` runs 3 steps under DDP on the stand-in: the graphs each step compiles (the
    split graphs of every recompile) and each recompile's step and torch's reason equal a real loop's."""
    ranks = shared_run(tmp_path_factory, script, cap_mb, False, world, steps=3)
    rc, out, err = cli("cudagraphs", DDP_FIXTURES / script, "--ddp", "--world-size", world, "--bucket-cap-mb", cap_mb,
                       "--format", "json")
    assert rc == 0, err
    doc = json.loads(out)
    steady = doc["cudagraphs"]["steady_state"]
    for real in ranks:
        assert real["failed"] is None
        assert [f["graphs_compiled"] for f in steady["per_step"]] == real["graphs_per_step"]
        assert [(r["step"], r["reason"].splitlines()[0]) for r in steady["recompiles"]] == \
            [(r["step"], r["reason"].strip().splitlines()[0]) for r in real["recompiles"]]
    if script == "recompile.py":  # a recompile in every later step, at the user's line
        assert [r["step"] for r in steady["recompiles"]] == [2, 3]
        assert all(r["file"].endswith("recompile.py") and r["line"] == 14 for r in steady["recompiles"])  # the guard's line: self.calls read
    # each split graph is a region with its own verdict
    assert [g["region"] for g in doc["ddp"]["graphs"]] == list(range(sum(real["graphs_per_step"])))
    assert all("cudagraphed" in g["cudagraphs"] for g in doc["ddp"]["graphs"])


UNUSED_CASES = [(False, 2), (True, 2), (False, 4), (True, 4)]


@pytest.mark.slow
@pytest.mark.parametrize("find_unused, world", cases(UNUSED_CASES, lambda r: f"unused-25MB-ws{r[1]}-{'find_unused' if r[0] else 'default'}"))
def test_unused_parameters_fail_the_second_step_as_predicted(cli, tmp_path_factory, world, find_unused):
    """unused.py: without find_unused_parameters=True every rank of a real loop fails at step 2 with
    DDP's reducer error; ``trace --ddp`` runs two steps and says so (exit 1), naming the parameters;
    ``cudagraphs --ddp`` (the stand-in, which cannot run torch's check) stops its loop at step 2 too."""
    from graphtool.capture.distributed.ddp import UNFINISHED_REDUCTION

    ranks = shared_run(tmp_path_factory, "unused.py", 25.0, find_unused, world, steps=2)
    flag = ["--find-unused-parameters"] if find_unused else []
    rc, out, err = cli("trace", DDP_FIXTURES / "unused.py", "--ddp", "--world-size", world, "--format", "json", *flag)
    unused = json.loads(out)["ddp"]["unused_parameters"]
    rc_cg, out_cg, err_cg = cli("cudagraphs", DDP_FIXTURES / "unused.py", "--ddp", "--world-size", world, "--format", "json",
                                *flag)
    steady = json.loads(out_cg)["cudagraphs"]["steady_state"]
    for real in ranks:
        assert sorted(unused["parameters"]) == real["no_grad_after_step1"] == ["unused.bias", "unused.weight"]
        if find_unused:
            assert real["failed"] is None and real["graphs_per_step"] == [2, 0]
            assert rc == 0 and unused["fails_at_step"] is None and unused["find_unused_parameters"]
            assert steady["failed"] is None and steady["steps"] == 3
        else:
            assert real["failed"]["step"] == 2 and real["failed"]["type"] == "RuntimeError"
            assert real["failed"]["message"].startswith(UNFINISHED_REDUCTION)
            assert rc == 1 and unused["fails_at_step"] == 2
            assert f"step 2 raised: RuntimeError: {UNFINISHED_REDUCTION}" in unused["error"]
            assert unused["source"]["line"] == 10 and unused["source"]["file"].endswith("unused.py")
            assert steady["steps"] == 1 and steady["failed"].startswith(f"step 2 raised: RuntimeError: {UNFINISHED_REDUCTION}")


MEMORY_CASES = [("mlp_adam.py", 25.0, 2), ("mlp8.py", 1.0, 2), ("mlp_adam.py", 25.0, 4)]


@pytest.mark.slow
@pytest.mark.parametrize("script, cap_mb, world", cases(MEMORY_CASES, lambda r: f"{r[0][:-3]}-{r[1]:g}MB-ws{r[2]}"))
def test_memory_ddp_rank_bytes_equal_torchs_own_objects_on_a_real_gloo_run(cli, tmp_path, script, cap_mb, world):
    """Each rank of a real loop of 2 (and 4) processes: its parameters' storages, the flat bucket tensors DDP's
    comm hook gets in each step (the first step's buckets, then the rebuilt ones), DDP's logged bucket sizes,
    and the state of the script's optimizer after one step, against ``memory --ddp``'s RankMemory."""
    ranks = run_ranks(DDP_FIXTURES / script, world, cap_mb, False, tmp_path, steps=2, memory=True)
    rc, out, err = cli("memory", DDP_FIXTURES / script, "--ddp", "--bucket-cap-mb", cap_mb, "--world-size", world,
                       "--format", "json")
    assert rc == 0, err
    rank = json.loads(out)["rank_memory"]
    for real in ranks:
        assert rank["params_bytes"] == real["params_bytes"] == real["logged_total_parameter_size_bytes"]
        assert rank["bucket_bytes"] == sum(real["logged_bucket_sizes"])
        assert [sum(step) for step in real["bucket_buffers_per_step"]] == [rank["bucket_bytes"]] * 2
        assert rank["optimizer_bytes"] == real.get("optimizer_bytes", 0)


@pytest.mark.slow
@pytest.mark.parametrize("world", cases([(2,), (4,)], lambda r: str(r[0])))
def test_a_collective_inside_the_graph_is_the_one_each_real_rank_compiles(cli, tmp_path, world):
    """tests/fixtures/ddp/allreduce_in_forward.py calls a functional all_reduce in its forward: each real
    rank's graph holds it (op, group, the group's ranks, bytes), and graphtool lists it in that forward graph,
    and AOT autograd's backward all_reduce of the gradient too."""
    script = DDP_FIXTURES / "allreduce_in_forward.py"
    ranks = run_ranks(script, world, 25.0, False, tmp_path)
    doc = predict(cli, script, 25.0, world, False)
    forward = [[c["op"], c["group"], c["group_size"], c["bytes"]] for c in doc["ddp"]["collectives"] if c["graph"] == "forward"]
    for real in ranks:  # dynamo's graph names the op's packet, AOT's graph its overload (.default)
        assert [[op + ".default", *rest] for op, *rest in real["collectives"]] == forward and len(forward) == 1
    assert forward[0][0] == "_c10d_functional.all_reduce.default" and forward[0][2] == world
    assert forward[0][3] == 16 * 512 * 4
    assert any(c["graph"] == "backward" and c["op"] == "_c10d_functional.all_reduce.default"
               for c in doc["ddp"]["collectives"])
