"""Host values recorded on the own device and replayed on the meta stand-in, each with the type its
Python protocol needs, and only the model's own reads (not torch.compile's)."""

from __future__ import annotations

import operator

import pytest
import torch

from graphtool.capture.standin.host_values import HostValues, as_protocol
from tests.helpers import FIXTURES

META = torch.empty((), device="meta")


@pytest.mark.parametrize("name, value, expected", [
    ("__bool__", 1.0, True), ("__bool__", 0, False), ("__int__", 3.0, 3), ("__index__", True, 1), ("__float__", 2, 2.0),
])
def test_each_protocol_gets_its_type(name, value, expected):
    got = as_protocol(name, META, value)
    assert got == expected and type(got) is type(expected)


@pytest.mark.parametrize("dtype, value, expected", [
    (torch.bool, 1, True), (torch.int64, 2.0, 2), (torch.float32, 1, 1.0), (torch.float32, [[0.5]], 0.5),
])
def test_item_is_the_python_scalar_of_the_dtype(dtype, value, expected):
    got = as_protocol("item", torch.empty((), dtype=dtype, device="meta"), value)
    assert got == expected and type(got) is type(expected)


def test_tolist_nests_as_deep_as_the_tensor():
    assert as_protocol("tolist", torch.empty(2, 2, dtype=torch.int64, device="meta"), [1, 2, 3, 4]) == [[1, 2], [3, 4]]
    assert as_protocol("tolist", torch.empty(3, dtype=torch.int64, device="meta"), [[1], [2], [3]]) == [1, 2, 3]
    assert as_protocol("tolist", torch.empty((), dtype=torch.int64, device="meta"), [7]) == 7


def test_a_float_read_replays_as_a_bool_where_if_asks():
    values = HostValues()
    values.values.append(0.75)  # an .item() on the own device, a truth value on the stand-in
    with values.replaying():
        assert bool(torch.empty((), device="meta")) is True
        # python would raise "__bool__ should return bool, returned float" without the conversion


def test_every_protocol_round_trips_from_cpu_to_meta():
    values = HostValues()
    t = torch.tensor([[1, 2], [3, 4]])
    with values.recording():
        got = [bool(t.any()), int(t[0, 0]), float(t[1, 1]), operator.index(t[0, 1]), t.tolist(), t.sum().item()]
    meta = t.to("meta")
    with values.replaying():
        again = [bool(meta.any()), int(meta[0, 0]), float(meta[1, 1]), operator.index(meta[0, 1]), meta.tolist(),
                 meta.sum().item()]
    assert again == got and [type(x) for x in again] == [type(x) for x in got]


def test_torch_compiles_own_reads_are_not_recorded():
    values = HostValues()

    def backend(gm, example_inputs):
        return gm.forward

    torch._dynamo.reset()
    with values.recording():
        torch.compile(lambda x: x * 2, backend=backend)(torch.ones(2)).tolist()
        from torch._subclasses.fake_tensor import FakeTensorMode

        with FakeTensorMode(allow_non_fake_inputs=True) as mode:
            fake = mode.from_tensor(torch.ones(()))
        with pytest.raises(RuntimeError):  # a fake tensor has no value: torch's own error, nothing recorded
            fake.item()
    assert list(values.values) == [[2.0, 2.0]]


@pytest.mark.parametrize("name, regions", [("mha_padding_eval", 2), ("tolist_gate", 3)])
def test_a_truth_value_after_a_host_read_keeps_the_standin_going(name, regions):
    """``if mask.any():`` (an MHA block in inference) and ``if self.gate(p).mean() > 0:`` after a
    ``.tolist()`` loop: every region is judged, none left "unknown"."""
    from graphtool.commands.cudagraphs import cudagraphs

    [result] = cudagraphs(str(FIXTURES / "steady" / f"{name}.py"), steps=1)
    assert result.stopped is None
    assert result.header["regions_judged"] == result.header["regions_compiled"] == regions
    assert result.report.eligible


def test_a_zero_d_tensor_formats_its_replayed_value():
    """transformers' MoE names its expert ``f"expert_{expert_idx[0]}"``: on meta torch prints the tensor instead."""
    values = HostValues()
    with values.recording():
        name = f"expert_{torch.tensor([3])[0]}"
    with values.replaying():
        again = f"expert_{torch.empty(1, dtype=torch.int64, device='meta')[0]}"
    assert name == again == "expert_3"
