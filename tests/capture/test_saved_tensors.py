"""The eager capture of what autograd saves, and the compat helpers ``graphtool memory`` reads torch through."""

from __future__ import annotations

import inspect
from pathlib import Path

import pytest
import torch
from torch import nn

from graphtool.capture import compat
from graphtool.capture.memory.saved_tensors import capture_saved, mark_varying_sizes
from graphtool.capture.user.script import ModelSpec
from tests.helpers import FIXTURES, example

HERE = str(Path(__file__).resolve())


def _spec(model, *args, **kwargs) -> ModelSpec:
    return ModelSpec(path=Path(HERE), entry="test", model=model, args=args, kwargs=kwargs)


def _line(fn, text: str) -> int:
    lines, start = inspect.getsourcelines(fn)
    return start + next(i for i, ln in enumerate(lines) if text in ln)


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 8)

    def forward(self, x):
        h = self.fc(x)
        return torch.sigmoid(h) * x


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = nn.ModuleList([Block(), Block()])

    def forward(self, x):
        for b in self.blocks:
            x = b(x)
        return x.sum(-1)


def test_each_saved_tensor_names_its_op_line_and_module():
    torch.manual_seed(0)
    cap = capture_saved(_spec(Net(), torch.randn(4, 8)))
    sig = [s for s in cap.saved if s.op == "aten.sigmoid.default"]
    assert sorted({s.module for s in sig}) == ["blocks.0", "blocks.1"]
    assert {s.source for s in sig} == {(HERE, _line(Block.forward, "torch.sigmoid"))}
    weights = [s for s in cap.saved if s.kind == "parameter"]
    assert {s.name for s in weights} == {"blocks.1.fc.weight"}  # x needs no grad: blocks.0's weight is not saved
    assert weights[0].op == "aten.t.default" and weights[0].module == "blocks.1.fc"
    assert [p.name for p in cap.parameters] == ["blocks.0.fc.weight", "blocks.0.fc.bias", "blocks.1.fc.weight", "blocks.1.fc.bias"]
    assert cap.training and cap.device == "cpu"


def test_one_storage_keeps_one_number():
    x = torch.randn(6, 6, requires_grad=True)

    def f(x):
        y = torch.exp(x)  # saves its result
        return (y * y[:, :3].sum()).sum()  # saves y (and a view of it)

    cap = capture_saved(_spec(f, x))
    exp = [s for s in cap.saved if s.op == "aten.exp.default"]
    assert len(exp) >= 2 and len({s.storage for s in exp}) == 1
    assert all(s.storage_bytes == 6 * 6 * 4 for s in exp)
    assert cap.saved[0].kind in ("activation", "input")


@pytest.mark.parametrize("reentrant", [False, True])
def test_ops_inside_checkpoint_are_marked(reentrant):
    from torch.utils.checkpoint import checkpoint

    class Outer(nn.Module):
        def __init__(self):
            super().__init__()
            self.block = Block()

        def forward(self, x):
            return checkpoint(self.block, x, use_reentrant=reentrant).sum()

    cap = capture_saved(_spec(Outer(), torch.randn(4, 8, requires_grad=True)))
    assert {o.op for o in cap.checkpointed} >= {"aten.addmm.default", "aten.sigmoid.default"}
    assert {o.module for o in cap.checkpointed if o.op == "aten.addmm.default"} == {"block.fc"}
    assert not [s for s in cap.saved if s.op == "aten.sigmoid.default"]  # recomputed in backward, not saved


def test_a_model_on_meta_runs_on_fake_tensors_with_the_same_result():
    from graphtool.capture.user.script import load_model

    cpu = capture_saved(load_model(example("convnet_bn.py")))
    meta = capture_saved(load_model(example("convnet_bn.py"), device="meta"))
    assert meta.device == "meta"
    keep = ("shape", "dtype", "tensor_bytes", "storage", "storage_bytes", "kind", "name", "op", "module")
    assert [[getattr(s, k) for k in keep] for s in cpu.saved] == [[getattr(s, k) for k in keep] for s in meta.saved]


def test_a_raising_model_is_the_users_error():
    from graphtool.errors import UserCodeFailed

    def f(x):
        raise ValueError("boom")

    with pytest.raises(UserCodeFailed, match="boom"):
        capture_saved(_spec(f, torch.randn(2)))


def test_mark_varying_sizes_uses_the_scripts_dynamic_inputs():
    import os

    from graphtool.capture.user.script import load_model

    os.environ.pop("LLAMA_SIZE", None)
    spec = load_model(str(FIXTURES / "memory" / "llama_seq.py"))
    assert mark_varying_sizes(spec) == ["input_ids.size(1)"]


# ---------------------------------------------------------------- compat


def _mlp_region():
    from graphtool.capture.tracer import trace_model
    from graphtool.capture.user.script import load_model

    return trace_model(load_model(str(FIXTURES / "memory" / "checkpointed.py")), backend="aot_eager").regions[0]


def test_partitioner_tag_and_checkpoint_policy_on_a_real_trace():
    region = _mlp_region()
    backward_calls = [n for n in region.backward.graph.nodes if n.op == "call_function"]
    tags = {compat.partitioner_tag(n) for n in backward_calls}
    assert tags == {"is_forward", "is_backward"}  # recomputed forward ops beside the gradient ops
    recomputed = [n for n in backward_calls if compat.partitioner_tag(n) == "is_forward"]
    assert {compat.checkpoint_policy(n) for n in recomputed} >= {"PREFER_RECOMPUTE"}
    forward_policies = {compat.checkpoint_policy(n) for n in region.forward.graph.nodes}
    assert {None, "PREFER_RECOMPUTE", "MUST_SAVE"} <= forward_policies


def test_symbol_sources_and_maybe_mark_dynamic():
    from graphtool.capture.tracer import trace_model
    from graphtool.capture.user.script import load_model

    spec = load_model(example("mlp.py"))
    compat.maybe_mark_dynamic(spec.args[0], 0)
    region = trace_model(spec, backend="aot_eager").regions[0]
    relu = next(n for n in region.forward.graph.nodes if n.name == "relu")
    found = compat.symbol_sources(relu.meta["val"])
    assert list(found.values()) == ["L['x'].size()[0]"]
    assert compat.symbol_sources(torch.zeros(2)) == {}


def test_fake_tensor_mode_takes_real_meta_tensors():
    mode = compat.fake_tensor_mode()
    lin = nn.Linear(4, 4, device="meta")
    with mode:
        out = lin(torch.zeros(2, 4, device="meta"))
    assert out.shape == (2, 4) and type(out).__name__ == "FakeTensor"
