"""Static inputs in the CUDA-graph verdict are the ones torch treats as static: parameters, buffers and
tensors marked with ``mark_static_address``, as AOT's ``static_input_indices`` lists them.

Each verdict is compared with torch's own mutation checks, run on the graph inductor itself compiles
for the same model on the CPU, with the static indices inductor itself was given."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from graphtool.analysis.cudagraphs.verdict import _static_indices, cudagraph_verdict
from graphtool.capture import compat
from graphtool.capture.standin.meta import to_meta
from graphtool.capture.tracer import trace_model
from graphtool.capture.user.script import load_model
from tests.helpers import FIXTURES

CACHE_WRITE = str(FIXTURES / "standin" / "static_cache_write.py")
STATIC_CACHE = str(FIXTURES / "standin" / "mistral_static_cache.py")
RUN_TIME = {"triton.cudagraph_support_input_mutation": True, "triton.cudagraph_trees": True}
COMPILE_TIME = {"triton.cudagraph_support_input_mutation": False, "triton.cudagraph_trees": True}


def _standin(path: str, entry: str | None = None, *, inference: bool = True):
    return trace_model(to_meta(load_model(path, entry=entry)), inference=inference, standin=True)


def _mutation_reasons(capture, config: dict) -> list:
    with compat.inductor_config_patch(config):
        verdict = cudagraph_verdict(capture, backend="inductor")
    return [r for r in verdict.reasons if r.code == "mutated-input"]


def _inductors_own_forward(entry: str) -> dict:
    """Compile and run the model with inductor on the CPU (inference), keeping the graph and
    ``static_input_idxs`` that inductor's ``inner_compile`` is given, and the real inputs it runs on."""
    from torch._functorch.aot_autograd import make_boxed_func
    from torch._inductor.compile_fx import compile_fx

    spec = load_model(CACHE_WRITE, entry=entry)
    seen: dict = {}

    def inner_compile(gm, inputs, **kw):
        seen.update(gm=gm, static=list(kw["static_input_idxs"]))

        def run(*args):  # the real inputs, whose addresses the run-time check looks at
            seen["inputs"] = list(args)
            return gm(*args)

        return make_boxed_func(run)

    torch._dynamo.reset()
    with torch.no_grad():
        torch.compile(spec.model, backend=lambda gm, ex: compile_fx(gm, ex, inner_compile=inner_compile))(*spec.args)
    torch._dynamo.reset()
    return seen


def _torchs_run_time_check(seen: dict) -> str | None:
    """CUDA-graph trees' ``check_for_mutation``, after their ``remove_unaligned_input_idxs``."""
    from torch._dynamo.backends.cudagraphs import find_input_mutations
    from torch._inductor import cudagraph_utils as cu
    from torch._inductor.utils import remove_unaligned_input_idxs

    gm = seen["gm"]
    fields = {f.name for f in dataclasses.fields(cu.WrappedFunction)}
    # torch 2.15 adds the re-record limit and action for CUDA-graph-managed inputs, from inductor's config
    newer = {name: compat.inductor_flag(f"triton.{name}") for name in
             ("cudagraph_managed_input_rerecord_limit", "cudagraph_managed_input_rerecord_action") if name in fields}
    func = cu.WrappedFunction(
        model=None, static_input_idxs=remove_unaligned_input_idxs(seen["inputs"], seen["static"]),
        id=cu.FunctionID(0), constants=(), placeholders=cu.get_placeholder_info(gm.graph),
        mutated_input_idxs=sorted(find_input_mutations(gm.graph)), **newer,
    )
    with compat.inductor_config_patch(RUN_TIME):
        return cu.check_for_mutation(func, seen["inputs"], lambda _: False)


def _torchs_compile_time_check(seen: dict) -> str | None:
    """inductor's ``check_for_mutation_ignore_cuda_graph_managed_tensor``, with its static indices."""
    from torch._dynamo.backends.cudagraphs import find_input_mutations
    from torch._inductor import cudagraph_utils as cu

    gm = seen["gm"]
    with compat.inductor_config_patch(COMPILE_TIME):
        return cu.check_for_mutation_ignore_cuda_graph_managed_tensor(gm, None, find_input_mutations(gm.graph), seen["static"])


def test_a_cache_marked_static_may_be_mutated():
    capture = _standin(CACHE_WRITE, "marked")
    region = capture.regions[0]
    mutated = compat.graph_input_mutations(region.forward.graph)
    assert mutated and mutated <= _static_indices(region.forward, region)  # the cache is written, and static
    assert _mutation_reasons(capture, RUN_TIME) == []
    assert _mutation_reasons(capture, COMPILE_TIME) == []


def test_an_unmarked_cache_is_a_mutated_input_with_torchs_message():
    capture = _standin(CACHE_WRITE, "unmarked")
    [run_time] = _mutation_reasons(capture, RUN_TIME)
    assert run_time.message == "skipping cudagraphs due to mutated inputs (1 instances) (checked at run time)"
    assert run_time.skips and run_time.source.line == 18
    [compile_time] = _mutation_reasons(capture, COMPILE_TIME)
    assert compile_time.message == "skipping cudagraphs due to mutated inputs (1 instances)"


def test_an_unaligned_static_input_is_copied_so_its_mutation_skips_at_run_time():
    capture = _standin(CACHE_WRITE, "unaligned")
    assert [r.message for r in _mutation_reasons(capture, RUN_TIME)] == [
        "skipping cudagraphs due to mutated inputs (1 instances) (checked at run time)"
    ]
    assert _mutation_reasons(capture, COMPILE_TIME) == []  # at compile time inductor does not look at addresses


@pytest.mark.parametrize("entry", ["marked", "unmarked", "unaligned"])
def test_static_inputs_and_verdicts_agree_with_torchs_own_checks(entry):
    seen = _inductors_own_forward(entry)
    region = _standin(CACHE_WRITE, entry).regions[0]
    assert _static_indices(region.forward, region) == set(seen["static"])
    capture = _standin(CACHE_WRITE, entry)
    for config, torch_check in ((RUN_TIME, _torchs_run_time_check), (COMPILE_TIME, _torchs_compile_time_check)):
        ours = _mutation_reasons(capture, config)
        theirs = torch_check(seen)
        assert bool(ours) == (theirs is not None)
        if theirs is not None:
            assert ours[0].message.startswith(theirs.split(". Found from")[0].strip())


@pytest.mark.parametrize("inference", [False, True])
def test_a_static_cache_decode_step_is_not_skipped_for_its_cache_writes(inference):
    capture = _standin(STATIC_CACHE, inference=inference)
    assert capture.regions
    for region in capture.regions:
        mutated = compat.graph_input_mutations(region.forward.graph)
        assert mutated <= _static_indices(region.forward, region, at_run_time=True)
    assert any(compat.graph_input_mutations(r.forward.graph) for r in capture.regions)  # the cache is written
    assert _mutation_reasons(capture, RUN_TIME) == []
    assert _mutation_reasons(capture, COMPILE_TIME) == []


def test_parameters_and_buffers_stay_static_without_a_mark():
    from tests.helpers import example

    capture = trace_model(to_meta(load_model(example("convnet_bn.py"))), standin=True)
    region = capture.regions[0]
    kinds = {r.position: r.ref.kind for r in region.forward_inputs if r.ref is not None}
    assert {p for p, k in kinds.items() if k in ("parameter", "buffer")} <= _static_indices(region.forward, region)
    assert _mutation_reasons(capture, RUN_TIME) == []
