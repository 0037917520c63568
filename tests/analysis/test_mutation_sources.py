"""Every mutation names the user's line that computed the new value, whichever way the backend's AOT
stage expresses it: written back as a graph output, or kept in the graph as a trailing ``copy_``
with no stack trace of its own (inductor, torch.compile's default, and aot_eager in training)."""

from __future__ import annotations

import pytest

from graphtool.analysis.mutations import analyze_mutations
from tests.helpers import example, traced


def _line_of(name: str, text: str) -> int:
    return next(i for i, ln in enumerate(open(example(name)).read().splitlines(), 1) if text in ln)


@pytest.mark.parametrize("backend", ["inductor", "aot_eager", "cudagraphs"])
def test_batchnorm_buffer_updates_name_the_batchnorm_call(backend):
    capture = traced("convnet_bn.py", backend=backend)
    report = analyze_mutations(capture)
    line = _line_of("convnet_bn.py", "self.bn(")
    for name in ("bn.running_mean", "bn.running_var", "bn.num_batches_tracked"):
        m = next(m for m in report.inputs if m.name == name)
        assert m.mutates_data
        assert m.source is not None and m.source.line == line, (backend, name, m.source)  # was None under inductor


@pytest.mark.parametrize("backend", ["inductor", "aot_eager", "cudagraphs"])
def test_an_input_mutated_in_place_names_its_line(backend):
    report = analyze_mutations(traced("mutate_input.py", backend=backend))
    m = next(m for m in report.inputs if m.name == "total")
    assert m.source is not None and m.source.line == _line_of("mutate_input.py", "total.add_(")



def test_a_buffer_copied_from_an_input_names_the_copy():
    # ``self.k_cache.copy_(x)``: the new value is an input itself, so AOT's in-graph ``copy_(primals_1, primals_2)``
    # has no stack trace to give, and the mutation read "<unknown location>" (``copy_(x * 2)`` had its line)
    import torch

    import graphtool

    class CopyIn(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("k_cache", torch.zeros(2, 4))
            self.register_buffer("v_cache", torch.zeros(2, 4))
            self.lin = torch.nn.Linear(4, 4)

        def forward(self, x):
            self.k_cache.copy_(x)
            self.v_cache[:] = x
            return self.lin(x)

    report = graphtool.mutations(CopyIn(), torch.randn(2, 4))  # inductor, the default
    first = CopyIn.forward.__code__.co_firstlineno
    lines = {m.name: (m.source.file, m.source.line) if m.source else None for m in report.inputs if m.mutates_data}
    assert lines == {"k_cache": (__file__, first + 1), "v_cache": (__file__, first + 2)}


def test_an_output_viewing_an_input_after_a_graph_break_names_its_line():
    # issue 44: "<unknown location>: GT-M003 output 1 is a view of input x" for ``return y, x[:, -1]`` after a break,
    # while the buffer's write had its line: the last graph returns the view alone, not the model's two outputs
    from pathlib import Path

    from graphtool.capture.tracer import trace_model
    from graphtool.capture.user.script import load_model

    path = Path(__file__).parent.parent / "fixtures" / "outputs" / "view_after_break.py"
    report = analyze_mutations(trace_model(load_model(str(path)), backend="aot_eager"))  # inductor: the same graphs, 13 s
    (alias,) = report.aliased_outputs
    assert (alias.index, alias.is_view, alias.alias_of["name"]) == (1, True, "x")
    line = next(i for i, ln in enumerate(path.read_text().splitlines(), 1) if ln.strip() == "return y, x[:, -1]")
    assert alias.source is not None and (alias.source.file, alias.source.line) == (str(path), line), alias.source
