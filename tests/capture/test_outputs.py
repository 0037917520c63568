"""Model outputs in every container torch's pytree knows get their backward graph; an output with
nothing to differentiate says so instead of silently having no backward."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from graphtool.capture import compat
from graphtool.capture.tensors import iter_tensors
from tests.helpers import FIXTURES

OUTPUTS = FIXTURES / "outputs"


@dataclass
class _Pair:
    a: torch.Tensor
    b: object


def test_iter_tensors_walks_dataclasses_and_pytree_nodes():
    x, y, z = torch.ones(1), torch.zeros(1), torch.full((1,), 2.0)
    found = list(iter_tensors({"p": _Pair(x, [y, ("text", 3)]), "q": torch.Size([2]), "r": None, "s": z}))
    assert [id(t) for t in found] == [id(x), id(y), id(z)]


def test_pytree_children_knows_registered_nodes_only():
    from collections import OrderedDict

    assert compat.pytree_children(OrderedDict(a=1, b=2)) == [1, 2]
    assert compat.pytree_children(object()) is None
    assert compat.pytree_children(_Pair(torch.ones(1), 0)) is None  # an unregistered dataclass: iter_tensors walks it itself


def test_a_dataclass_output_gets_its_backward_graph(cli):
    rc, out, err = cli("trace", OUTPUTS / "dataclass_output.py", "--format", "json")
    assert rc == 0, err
    import json

    doc = json.loads(out)
    assert doc["graphs"][0]["backward"] is not None  # was None: the dataclass output was never differentiated
    assert doc["no_backward"] is None


def test_an_output_with_nothing_to_differentiate_says_so(cli):
    rc, out, err = cli("trace", OUTPUTS / "argmax_output.py", "--format", "json")
    assert rc == 0, err
    import json

    doc = json.loads(out)
    assert doc["model"]["training"] is True
    assert doc["graphs"][0]["backward"] is None
    assert "requires grad" in doc["no_backward"]
    rc, out, _ = cli("trace", OUTPUTS / "argmax_output.py")
    assert "training, but no tensor in the model's output (Tensor, 1 tensor) requires grad" in " ".join(out.split())
