"""Mutation and aliasing facts, checked against torch.export's graph signature and eager torch."""

from __future__ import annotations

import torch
from torch import nn

from graphtool.analysis.mutations import analyze_mutations
from graphtool.capture.tracer import trace_model
from graphtool.capture.user.script import ModelSpec, load_model
from tests.helpers import example, traced


def _spec(model, *args, **kwargs) -> ModelSpec:
    from pathlib import Path

    return ModelSpec(path=Path("inline.py"), entry="test", model=model, args=args, kwargs=kwargs)


def _mutated(capture) -> dict[str, tuple[bool, bool, bool]]:
    return {m.name: (m.mutates_data, m.mutates_metadata, m.mutates_storage) for m in analyze_mutations(capture).mutated}


def test_batchnorm_train_mutates_exactly_its_running_stats():
    assert _mutated(traced("convnet_bn.py")) == {
        "bn.running_mean": (True, False, False),
        "bn.running_var": (True, False, False),
        "bn.num_batches_tracked": (True, False, False),
    }


def test_batchnorm_eval_mutates_nothing():
    spec = load_model(example("convnet_bn.py"))
    spec.model.eval()
    assert _mutated(trace_model(spec)) == {}


def test_mutations_agree_with_torch_export_signature():
    for name, _train in (("convnet_bn.py", True), ("mutate_input.py", False)):
        spec = load_model(example(name))
        ours = {m.name for m in analyze_mutations(trace_model(spec)).mutated}
        spec = load_model(example(name))
        module = spec.model if isinstance(spec.model, nn.Module) else _Wrap(spec.model)
        ep = torch.export.export(module, spec.args, spec.kwargs).run_decompositions()
        sig = ep.graph_signature
        user_names = [s.arg.name for s in sig.input_specs if s.kind.name == "USER_INPUT"]
        arg_names = _arg_names(spec)
        exported = set(sig.buffers_to_mutate.values())
        exported |= {arg_names[user_names.index(n)] for n in sig.user_inputs_to_mutate.values()}
        assert ours == exported, name


class _Wrap(nn.Module):
    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def forward(self, *args, **kwargs):
        return self.fn(*args, **kwargs)


def _arg_names(spec):
    from graphtool.capture.user.input_names import positional_names

    return positional_names(spec)


def test_user_input_mutation_has_the_users_line():
    rep = analyze_mutations(traced("mutate_input.py"))
    (m,) = rep.mutated
    assert (m.name, m.kind, m.mutates_data) == ("total", "user_input", True)
    assert m.source is not None and m.source.file.endswith("mutate_input.py") and m.source.line == 6


def test_metadata_mutation_applied_by_dynamo_is_reported():
    rep = analyze_mutations(traced("transpose_input.py"))
    (m,) = rep.mutated
    assert (m.name, m.mutates_data, m.mutates_metadata) == ("x", False, True)


def test_storage_mutation_is_reported():
    def rebind(a, b):
        a.set_(b)
        return a + 1

    rep = analyze_mutations(trace_model(_spec(rebind, torch.randn(3), torch.randn(3))))
    assert [(m.name, m.mutates_storage) for m in rep.mutated] == [("a", True)]


def test_mutation_under_no_grad_in_training():
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(3, 3)
            self.register_buffer("count", torch.zeros(()))

        def forward(self, x):
            with torch.no_grad():
                self.count.add_(1)
            return self.fc(x)

    rep = analyze_mutations(trace_model(_spec(M(), torch.randn(2, 3))))
    (m,) = rep.mutated
    assert m.name == "count" and m.kind == "buffer" and m.under_no_grad


def test_output_aliasing_matches_eager_storage_sharing():
    cap = traced("view_outputs.py")
    rep = analyze_mutations(cap)
    facts = [(o.index, o.is_view, o.alias_of and (o.alias_of["kind"], o.alias_of["index"])) for o in rep.model_outputs]
    assert facts == [(0, True, ("input", 0)), (1, True, ("input", 0)), (2, False, None), (3, True, ("output", 2))]
    # eager torch agrees
    spec = load_model(example("view_outputs.py"))
    out = spec.model(*spec.args)
    x = spec.args[0]
    same = lambda a, b: a.untyped_storage().data_ptr() == b.untyped_storage().data_ptr()  # noqa: E731
    assert [same(o, x) for o in out] == [True, True, False, False]
    assert same(out[3], out[2])


def test_same_tensor_twice_and_views_share_storage():
    rep = analyze_mutations(traced("same_tensor_twice.py"))
    assert [(a.names, a.relation) for a in rep.input_aliases] == [(("a", "b"), "same_tensor")]
    assert [m.name for m in rep.mutated] == ["c"]


def test_facts_per_region_across_graph_breaks():
    rep = analyze_mutations(traced("item_branch.py"))
    regions = {m.name: m.regions for m in rep.inputs}
    assert regions["fc.weight"] == (0,)
    assert not rep.mutated


def test_verdict_line():
    assert analyze_mutations(traced("convnet_bn.py")).verdict() == "3 buffers mutated"
    assert "output 3 is a view of output 2" in analyze_mutations(traced("view_outputs.py")).verdict()


def test_mutations_command_check_exit_codes(cli):
    rc, out, _ = cli("mutations", example("convnet_bn.py"), "--check")
    assert rc == 1 and "3 buffers mutated" in out
    rc, _, _ = cli("mutations", example("mlp.py"), "--check")
    assert rc == 0
    rc, out, _ = cli("mutations", example("mlp.py"), "--all")
    assert rc == 0 and "fc1.weight" in out
