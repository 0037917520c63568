"""``graphtool memory --fit/--budgets`` (issue 35): sizes and GPU names, bad input, and the budget sweep's saved set
against inductor's own partition at each budget (a real ``torch.compile`` with the budget set, its backward graph
read from torch's structured trace), node for node."""

from __future__ import annotations

import json
from importlib import resources

import pytest

from graphtool.analysis.memory.fit import GPUS, parse_budgets, parse_size, parse_target
from tests.helpers import FIXTURES

FIT = FIXTURES / "fit"


@pytest.mark.parametrize("text,expected", [("24GiB", 24 * 2**30), ("24GB", 24 * 10**9), ("512MiB", 512 * 2**20),
                                           ("80 gb", 80 * 10**9), ("1.5GiB", 3 * 2**29), ("1000", 1000)])
def test_sizes_are_exact_in_both_unit_families(text, expected):
    assert parse_size(text) == expected


def test_every_gpu_name_in_the_table_resolves_case_blind():
    for g in GPUS:
        assert parse_target(g.name.lower()).gpu is g


@pytest.mark.parametrize("args,says", [
    (["--fit", "24XB"], "not a size or a GPU graphtool knows"),
    (["--fit", "-1"], "must be more than 0 bytes"),
    (["--fit", "H300"], "not a size or a GPU graphtool knows"),
    (["--fit", "1e400"], "larger than any device"),
    (["--fit", "0.0001"], "at least 1 byte"),
    (["--budgets", "1.5"], "outside 0..1"),
    (["--budgets", "1,x"], "is not a number"),
])
def test_bad_input_exits_2_saying_what_is_accepted(cli, args, says):
    rc, out, err = cli("memory", FIT / "mlp.py", *args)
    assert rc == 2, err
    assert says in err
    assert ("GiB" in err and "H100" in err) if "--fit" in args else "between 0 and 1" in err or "1.0 saves" in err


@pytest.mark.parametrize("args,says", [
    (["--fit", "H300"], "not a size or a GPU graphtool knows"),
    (["--budgets", "2"], "outside 0..1"),
    (["--fit", "24GiB", "--no-memory"], "--fit/--budgets with --no-memory"),
    (["--fit", "24GiB", "--inference"], "--fit/--budgets with --inference"),
])
def test_report_takes_fit_as_memory_does(cli, args, says, tmp_path):
    out = tmp_path / "page.html"
    rc, _, err = cli("report", FIT / "mlp.py", "-o", out, *args)
    assert rc == 2 and says in err, err
    assert not out.exists()


def test_bare_budgets_is_the_default_sweep():
    assert parse_budgets("default") == (1.0, 0.8, 0.6, 0.4, 0.2, 0.0)


@pytest.mark.slow  # over 10 s: the slow tier (docs/ci.md)
def test_budgets_on_a_model_with_no_backward_exits_2(cli):
    rc, out, err = cli("memory", FIT / "inference.py", "--budgets")
    assert rc == 2
    assert "no backward graph" in err


# ------------------------------------------------------------------ the partition at each budget, against inductor

BUDGETS = (1.0, 0.5, 0.1)
#: the decoder's three real inductor compiles were 79 s of CI's slow tier: two budgets, the default and the lowest
#: (the most recomputation), check what graphtool reads of attention's partition; the MLP checks all three
BUDGETS_OF = {"mlp_narrow": BUDGETS, "decoder_tiny": (1.0, 0.1)}


def inductor_saved(path, budget: float) -> list[str]:
    """The backward graph's saved placeholders when torch.compile (inductor, real code generation) compiles the
    script's model with ``activation_memory_budget`` set: read from torch's structured trace."""
    import torch

    from graphtool.capture.tensors import iter_tensors
    from tests.commands.test_memory import _BackwardGraphs, load_fresh

    model, args, kwargs = load_fresh(path)
    torch._dynamo.reset()
    with torch._functorch.config.patch(activation_memory_budget=budget, enable_autograd_cache=False), \
            torch._inductor.config.patch(fx_graph_cache=False), _BackwardGraphs() as graphs:
        out = torch.compile(model)(*args, **kwargs)
        leaves = [t for t in iter_tensors(out) if t.requires_grad and t.grad_fn is not None]
        torch.autograd.backward(leaves, [torch.ones_like(t) for t in leaves])
    torch._dynamo.reset()
    names = []
    for payload in graphs.graphs:
        from tests.commands.test_memory import backward_saved

        names.append([n for n, _, _ in backward_saved(payload)])
    return names


# the decoder on the pinned torch only (docs/ci.md): the mlp runs torch's partitioner at each budget on every torch,
# what the decoder adds (attention's saved set, two real compiles) is graphtool's reading of it
@pytest.fixture(scope="module", params=["mlp_narrow", pytest.param("decoder_tiny", marks=pytest.mark.one_torch)])
def swept(request):
    """One graphtool sweep (JSON) and inductor's own partition at each budget, per model: shared by the tests."""
    from graphtool.commands.memory import memory

    path = FIT / f"{request.param}.py"
    budgets = BUDGETS_OF[request.param]
    (result,) = memory(str(path), budgets=",".join(str(b) for b in budgets))
    truth = {b: inductor_saved(path, b) for b in budgets}
    return result, truth


@pytest.mark.slow  # over 60 s: the slow tier (docs/ci.md)
def test_saved_set_at_each_budget_is_inductors_own(swept):
    result, truth = swept
    for point in result.fit.budgets:
        got = [list(names) for names in point.saved]
        assert got == truth[point.budget], point.budget


@pytest.mark.slow  # over 60 s: the slow tier (docs/ci.md)
def test_sweep_document_matches_the_schema(swept):
    import jsonschema

    result, _ = swept
    doc = result.to_dict()
    assert [p["budget"] for p in doc["fit"]["budgets"]] == list(swept[1])  # the budgets asked for, in order
    jsonschema.validate(doc, json.loads(resources.files("graphtool.schema").joinpath("memory.schema.json").read_text()))
    # the timeline: forward points, backward points, the optimizer's step, in that order; its highest point of the
    # forward and backward is the compiled step's peak there (the same walk, node by node)
    timeline, compiled = doc["fit"]["timeline"], doc["fit"]["compiled"]
    phases = [p["phase"] for p in timeline]
    assert phases == sorted(phases, key=["forward", "backward", "optimizer"].index)
    for phase in ("forward", "backward"):
        assert max(p["bytes"] for p in timeline if p["phase"] == phase) == compiled[phase]
    page = result.html()  # the page's "Will it fit" section draws it, the peak named at its node
    peak = max(timeline, key=lambda p: p["bytes"])
    assert '<section id="fit">' in page and '<svg class="timeline"' in page and f"at {peak['node']} ({peak['phase']})" in page


@pytest.mark.slow  # five inductor compiles: the slow tier (docs/ci.md)
def test_a_region_budget_is_honoured_and_swept_as_inductor_does(monkeypatch):
    """A model's own ``region_activation_memory_budget(0.0)`` (torch 2.13+): graphtool runs the eager column
    without it (torch raises there) and says so; the compiled saved set is torch's partition at the region's budget,
    whatever global budget the sweep sets; the region's own budget swept gives what inductor saves when the model
    enters the region with that budget. Node for node against real inductor compiles."""
    from graphtool.capture import compat
    from graphtool.commands.memory import memory

    if not compat.has_region_activation_memory_budget():
        pytest.skip("torch.autograd.graph.region_activation_memory_budget is torch 2.13+")
    path = FIT / "region_budget.py"
    (result,) = memory(str(path), budgets="1,0.5")
    truth = inductor_saved(path, 1.0)
    assert truth == inductor_saved(path, 0.5)  # the region's own budget wins over the global one, in torch too
    for point in result.fit.budgets:
        assert [list(names) for names in point.saved] == truth, point.budget
    notes = " ".join(result.report.notes + result.fit.notes)
    assert "region_activation_memory_budget(0.0) at" in notes and "region_budget.py:21" in notes
    assert "region 0's own budget 0.0" in notes
    assert result.report.eager.by_kind["activation"][0] > result.fit.budgets[0].saved_bytes  # eager: no budget
    swept = {p.budget: p for p in result.fit.region_budgets}
    assert sorted(swept) == [0.5, 1.0] and {p.region for p in swept.values()} == {0}
    for budget, point in swept.items():
        monkeypatch.setenv("REGION_BUDGET", str(budget))
        assert [list(names) for names in point.saved] == inductor_saved(path, 1.0), budget
    assert swept[1.0].saved_bytes > swept[0.5].saved_bytes > result.fit.budgets[0].saved_bytes
    assert "Region 0&#x27;s own budget" in result.html() or "Region 0's own budget" in result.html()


@pytest.mark.one_torch  # graphtool's own stdout and its one line; the pool's torch part: test_memory_fit_h200.py
def test_the_json_document_and_the_answer_when_only_reduce_overhead_is_over(cli):
    """examples/graph_breaks.py prints in its forward; the fit's own eager step and optimizer step run it again:
    those prints go to stderr, as the trace's do, so ``--format json`` stays one document. At 1 MiB its compiled
    step fits and reduce-overhead's pool (one 2 MiB segment at least) does not: the one line says both."""
    from tests.helpers import ROOT

    rc, out, err = cli("memory", ROOT / "examples" / "graph_breaks.py", "--fit", "1MiB", "--format", "json")
    assert rc == 0, err
    assert "logging from forward" in err
    fit = json.loads(out)["fit"]
    ro = fit["reduce_overhead"]
    assert fit["compiled"]["peak"] < 2**20 < ro["peak"]
    assert ro["pool"] >= 2 * 2**20 and ro["pool"] % (2 * 2**20) == 0  # whole segments
    assert fit["verdict"].startswith("fits 1.0 MiB with ")
    assert "; reduce-overhead " in fit["verdict"] and "does not fit (over by " in fit["verdict"]
