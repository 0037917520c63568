"""graphtool.testing: each assertion passes on a clean model and fails with the CLI's diagnostic,
naming the user's file and line."""

from __future__ import annotations

import pytest

from graphtool import testing

torch = pytest.importorskip("torch")


class Chatty(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(2, 2)

    def forward(self, x):
        x = self.fc(x)
        print("hi")  # the graph break
        return x + 1


PRINT_LINE = Chatty.forward.__code__.co_firstlineno + 2


def write_cache(x, cache):
    cache.add_(x)  # the mutation
    return x.sum()


def test_no_graph_breaks_fails_with_the_ruff_style_diagnostic_at_the_users_line():
    with pytest.raises(AssertionError) as info:
        testing.assert_no_graph_breaks(Chatty(), torch.randn(2))
    message = str(info.value)
    assert message.startswith("Chatty has 1 graph break (expected none):\n")
    assert f"test_testing.py:{PRINT_LINE}:9: GT-B001 graph break: Failed to trace builtin operator [gb0059]" in message
    assert 'print("hi")  # the graph break' in message
    assert "= help: " in message and "= see: https://meta-pytorch.github.io/compile-graph-break-site/gb/gb0059.html" in message


def test_a_budget_of_breaks_and_a_clean_model_pass():
    r = testing.assert_graph_breaks_at_most(1, Chatty(), torch.randn(2))
    assert len(r.graph_breaks) == 1
    testing.assert_no_graph_breaks(torch.nn.Linear(2, 2), torch.randn(2))


def test_recompiles_over_steps_fail_and_steady_shapes_pass():
    def branchy(x):
        return (x * 2).sum() if x.shape[0] < 4 else x.sum()

    testing.assert_no_recompiles(branchy, [torch.randn(2), torch.randn(2)])
    with pytest.raises(AssertionError, match=r"(?s)branchy recompiled 2 times over 3 steps.*GT-B003 recompile of branchy"):
        testing.assert_no_recompiles(branchy, [(torch.randn(2),), (torch.randn(3),), (torch.randn(4),)])


def test_cudagraphable_and_input_mutations():
    testing.assert_cudagraphable(torch.nn.Linear(2, 2), torch.randn(2))
    with pytest.raises(AssertionError, match=r"(?s)write_cache would not be CUDA-graphed \(backend 'inductor'\).*CG011"):
        testing.assert_cudagraphable(write_cache, torch.randn(2), torch.zeros(2))
    line = write_cache.__code__.co_firstlineno + 1
    with pytest.raises(AssertionError) as info:
        testing.assert_no_input_mutations(write_cache, torch.randn(2), torch.zeros(2))
    assert f":{line}:5: GT-M001 user input cache mutated in place" in str(info.value)
    assert "cache.add_(x)  # the mutation" in str(info.value)
    testing.assert_no_input_mutations(write_cache, torch.randn(2), torch.zeros(2), allow=["user_inputs"])


def test_lint_takes_a_baseline_file_and_counts_only_new_breaks(tmp_path):
    import json

    import graphtool

    first = graphtool.lint(Chatty(), torch.randn(2))
    from graphtool.analysis.lint import make_baseline

    path = tmp_path / "baseline.json"
    path.write_text(json.dumps(make_baseline(first.report, root=tmp_path)))
    again = graphtool.lint(Chatty(), torch.randn(2), baseline=path, max_graph_breaks=0)
    assert again.passed and [b.new for b in again.graph_breaks] == [False]
    assert not graphtool.lint(Chatty(), torch.randn(2), max_graph_breaks=0).passed


class TopCache(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("k_cache", torch.zeros(2))

    def forward(self, x):
        self.k_cache.add_(x)
        return x * 2


def test_a_star_dot_pattern_accepts_a_top_level_buffer_and_the_help_is_python():
    # the README's allow=["*.k_cache"] failed for a buffer at the top (FQN "k_cache"), and the
    # failure told a Python caller to run `mutations --check --allow buffers`
    with pytest.raises(AssertionError) as info:
        testing.assert_no_input_mutations(TopCache(), torch.randn(2))
    assert 'accept it with `allow=["buffers"]`' in str(info.value) and "--allow" not in str(info.value)
    testing.assert_no_input_mutations(TopCache(), torch.randn(2), allow=["*.k_cache"])


@pytest.mark.slow  # three memory traces
def test_fits_holds_the_predicted_step_peak_to_a_device_size():
    from graphtool.analysis.memory.saved import format_bytes
    from graphtool.errors import UsageError
    from graphtool.testing import assert_fits

    net = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.GELU(), torch.nn.Linear(256, 64))
    x = torch.randn(32, 64)
    peak = assert_fits(net, x, device_memory="1MiB").fit.compiled.peak
    with pytest.raises(AssertionError) as err:
        assert_fits(net, x, device_memory="256KiB")
    said = str(err.value)
    assert said.startswith("Sequential does not fit 256.0 KiB: over by ")
    assert f"(predicted step peak {format_bytes(peak)})" in said
    assert "biggest: parameters 129.2 KiB" in said and "(no line)" not in said
    with pytest.raises(UsageError, match="--fit 'H300': not a size or a GPU graphtool knows"):
        assert_fits(net, x, device_memory="H300")
