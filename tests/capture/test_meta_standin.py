"""The accelerator stand-in moves every tensor the model reaches to meta, keeping identity and marks."""

from __future__ import annotations

import dataclasses
from collections import namedtuple

import pytest
import torch
from torch import nn

from graphtool.capture import compat
from graphtool.capture.standin.meta import MetaMover, to_meta
from graphtool.capture.user.script import load_model
from tests.helpers import FIXTURES

STANDIN = FIXTURES / "standin"


class Layer:
    def __init__(self, keys: torch.Tensor):
        self.keys, self.values = keys, keys.clone()
        self.device, self.dtype = keys.device, keys.dtype


class Cache:
    def __init__(self, n: int):
        self.layers = [Layer(torch.zeros(1, 2, 8, 4)) for _ in range(n)]


class Slotted:
    __slots__ = ("t", "unset")

    def __init__(self, t):
        self.t = t


@dataclasses.dataclass(frozen=True)
class Frozen:
    t: torch.Tensor
    extra: dict


class WithPlainAttrs(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)
        self.mask = torch.ones(4)  # a plain attribute, not a buffer: Module.to leaves it behind
        self.table = {"scale": torch.full((4,), 2.0)}
        self.here = torch.device("cpu")  # a module's own device attribute stays: model.to(cuda) keeps it too

    def forward(self, x):
        return self.fc(x) * self.mask * self.table["scale"]


def test_cache_objects_move_with_their_layers_and_device():
    cache = Cache(2)
    moved = MetaMover().move({"past_key_values": cache})
    assert moved["past_key_values"] is cache  # changed in place, the object kept
    for layer in cache.layers:
        assert (layer.keys.device.type, layer.values.device.type, layer.device.type) == ("meta",) * 3
        assert layer.dtype is torch.float32


def test_module_plain_attributes_move_but_not_its_device_attribute():
    model = WithPlainAttrs()
    MetaMover().move(model)
    assert model.fc.weight.device.type == "meta"
    assert model.mask.device.type == "meta" and model.table["scale"].device.type == "meta"
    assert "mask" not in model._buffers
    assert model.here == torch.device("cpu")


def test_identity_and_aliasing_are_kept():
    model = nn.Linear(3, 3)
    shared = torch.randn(3)
    spec = dict(weight=model.weight, a=[shared], b=(shared, Slotted(shared)))
    mover = MetaMover()
    mover.move(model)
    moved = mover.move(spec)
    assert moved["weight"] is model.weight  # an input that is a parameter stays that parameter
    assert moved["a"][0] is moved["b"][0] is moved["b"][1].t
    assert moved["a"][0].device.type == "meta"


def test_views_stay_views_of_the_moved_base():
    base = torch.randn(4, 4)
    view = base[1:, :2]
    moved_view, moved_base = MetaMover().move((view, base))
    assert moved_view._is_view() and compat.storage_key(moved_view) == compat.storage_key(moved_base)
    assert (moved_view.shape, moved_view.stride(), moved_view.storage_offset()) == ((3, 2), (4, 1), 4)


def test_requires_grad_and_parameter_type_are_kept():
    grad = torch.randn(2, requires_grad=True)
    param = nn.Parameter(torch.randn(2))
    frozen_param = nn.Parameter(torch.randn(2), requires_grad=False)
    a, b, c = MetaMover().move((grad, param, frozen_param))
    assert a.requires_grad and a.is_leaf
    assert isinstance(b, nn.Parameter) and b.requires_grad
    assert isinstance(c, nn.Parameter) and not c.requires_grad


def test_dynamo_marks_move_with_the_tensor():
    cache, x = torch.zeros(2, 8), torch.randn(3, 4)
    torch._dynamo.mark_static_address(cache)
    torch._dynamo.mark_dynamic(x, 0)
    model = nn.BatchNorm1d(4)
    torch._dynamo.mark_static_address(model.running_mean, guard=True)
    mover = MetaMover()
    mover.move(model)
    moved_cache, moved_x = mover.move((cache, x))
    assert moved_cache._dynamo_static_input_type == "unguarded"
    assert moved_x._dynamo_dynamic_indices == {0}
    assert model.running_mean.device.type == "meta"
    assert model.running_mean._dynamo_static_input_type == "guarded"


def test_frozen_dataclasses_slots_namedtuples_and_cycles():
    pair = namedtuple("Pair", "left right")
    frozen = Frozen(torch.ones(1), {"nested": [torch.ones(2)]})
    slotted = Slotted(torch.ones(3))
    loop: list = [torch.ones(4)]
    loop.append(loop)
    moved = MetaMover().move((frozen, slotted, pair(torch.ones(1), 2), loop))
    assert moved[0] is frozen and frozen.t.device.type == "meta"
    assert frozen.extra["nested"][0].device.type == "meta"
    assert slotted.t.device.type == "meta"
    assert type(moved[2]) is pair and moved[2].left.device.type == "meta" and moved[2].right == 2
    assert loop[0].device.type == "meta" and loop[1] is loop


def test_the_walk_stops_at_the_depth_limit():
    deep: list = [torch.ones(1)]
    for _ in range(5):
        deep = [deep]
    MetaMover(max_depth=3).move(deep)
    inner = deep
    for _ in range(5):
        inner = inner[0]
    assert inner[0].device.type == "cpu"


def test_a_bound_forward_as_the_model_moves_its_module():
    model = WithPlainAttrs()
    MetaMover().move(model.forward)
    assert model.fc.weight.device.type == "meta" and model.mask.device.type == "meta"


def test_to_meta_moves_a_transformers_static_cache_keeping_its_marks():
    spec = to_meta(load_model(STANDIN / "mistral_static_cache.py"))
    cache = spec.kwargs["past_key_values"]
    assert all(p.device.type == "meta" for p in spec.model.parameters())
    assert spec.args[0].device.type == "meta" and spec.kwargs["cache_position"].device.type == "meta"
    for layer in cache.layers:
        for t in (layer.keys, layer.values, layer.cumulative_length):
            assert t.device.type == "meta"
            assert t._dynamo_static_input_type == "unguarded"  # transformers' mark_static_address
        assert layer.device == torch.device("meta")


@pytest.mark.slow  # over 6 s: the slow tier (docs/ci.md)
def test_cudagraphs_on_a_stock_decoder_with_its_default_cache():
    from graphtool.commands.cudagraphs import cudagraphs

    [result] = cudagraphs(str(STANDIN / "mistral_default_cache.py"))
    assert result.report.regions >= 1


@pytest.mark.slow  # over 6 s: the slow tier (docs/ci.md)
def test_trace_on_meta_of_a_stock_decoder_with_its_default_cache():
    from graphtool.commands.trace import trace

    [result] = trace(str(STANDIN / "mistral_default_cache.py"), device="meta")
    assert result.report.to_dict()["graphs"]


@pytest.mark.slow  # over 6 s: the slow tier (docs/ci.md)
def test_cudagraphs_on_a_static_cache_decode_step():
    from graphtool.commands.cudagraphs import cudagraphs

    [result] = cudagraphs(str(STANDIN / "mistral_static_cache.py"))
    assert result.report.regions >= 1


@pytest.mark.slow  # over 6 s: the slow tier (docs/ci.md)
def test_trace_on_meta_of_a_static_cache_decode_step():
    from graphtool.commands.trace import trace

    [result] = trace(str(STANDIN / "mistral_static_cache.py"), device="meta")
    assert result.report.to_dict()["graphs"]


def _empty_then_cat(x):
    return torch.cat([torch.tensor([], dtype=x.dtype, device=x.device), x])


def test_meta_constants_as_fake_lets_dynamo_trace_torch_tensor_on_meta():
    x = torch.randn(3, device="meta")
    torch._dynamo.reset()
    with compat.meta_constants_as_fake():
        assert torch.compile(_empty_then_cat, backend="aot_eager", fullgraph=True)(x).shape == (3,)
    if not compat.meta_constructors_make_fake():  # the torch bug is there: without the hook the trace fails
        torch._dynamo.reset()
        with pytest.raises(Exception, match="fake tensor"):
            torch.compile(_empty_then_cat, backend="aot_eager", fullgraph=True)(x)
    torch._dynamo.reset()


def test_meta_constants_as_fake_still_refuses_real_cpu_tensors():
    from torch._subclasses.fake_tensor import FakeTensorMode

    real = torch.ones(2)
    with compat.meta_constants_as_fake(), FakeTensorMode():
        fake = torch.ones(2)
        with pytest.raises(AssertionError, match="convert all Tensors to FakeTensors"):
            fake + real


def test_the_fake_tensor_hook_exists_or_torch_fixed_the_bug():
    """meta_constants_as_fake silently does nothing without its hook: a torch that drops it must fail here."""
    from torch._subclasses import fake_tensor

    hook = hasattr(fake_tensor.FakeTensorMode, "validate_and_convert_non_fake_tensors") and hasattr(
        fake_tensor.fake_tensor_tls, "allow_non_fake_inputs_override")
    assert hook or compat.meta_constructors_make_fake()


def test_cudagraph_input_alignment_is_inductors():
    import torch._inductor.utils as inductor_utils

    assert compat.cudagraph_input_alignment() == inductor_utils.ALIGNMENT == 16


SCALE = None  # a module-level tensor the function below reaches (set by the test)


def test_a_functions_closure_modules_and_global_tensors_are_the_models():
    """What a plain function reaches through closures and globals moves to meta and is named as the code names it."""
    import torch

    from graphtool.capture.standin.meta import to_meta
    from graphtool.capture.user.input_names import named_state
    from graphtool.capture.user.script import ModelSpec

    def make():
        lin = torch.nn.Linear(2, 2)

        @torch.no_grad()
        def step(x):
            return lin(x) * SCALE

        return step

    step = make()
    global SCALE
    SCALE = torch.ones(2)
    try:
        params, buffers = named_state(step)
        assert [n for n, _ in params] == ["lin.weight", "lin.bias"] and [n for n, _ in buffers] == ["SCALE"]
        to_meta(ModelSpec(path=__file__, entry="model", model=step, args=(torch.zeros(1, 2),)))
        params, buffers = named_state(step)
        assert {t.device.type for _, t in params + buffers} == {"meta"}
    finally:
        SCALE = None
