"""``allow_mutations`` in graphtool.yaml: what ``mutations --check`` accepts, per model or for all, validated."""

from __future__ import annotations

import shutil

import pytest

from graphtool.config import MUTATION_KINDS, load_config
from graphtool.errors import ConfigError
from tests.helpers import example


def _project(tmp_path, config: str):
    shutil.copy(example("convnet_bn.py"), tmp_path / "convnet_bn.py")  # BatchNorm in training: buffers mutated
    shutil.copy(example("mlp.py"), tmp_path / "mlp.py")
    (tmp_path / "graphtool.yaml").write_text(config)
    return tmp_path


def test_kinds_are_the_ones_allow_understands():
    from graphtool.analysis.mutations import ALLOW_KINDS

    assert set(MUTATION_KINDS) == set(ALLOW_KINDS)


def test_per_model_and_default_values(tmp_path):
    cfg = load_config(_project(tmp_path, "allow_mutations: [buffers]\nmodels:\n  - convnet_bn.py\n"
                                         "  - path: mlp.py\n    allow_mutations: ['*.k_cache']\n") / "graphtool.yaml")
    assert cfg.allowed_mutations(tmp_path / "convnet_bn.py") == ("buffers",)
    assert cfg.allowed_mutations(tmp_path / "mlp.py") == ("*.k_cache",)
    assert cfg.allowed_mutations(tmp_path / "elsewhere.py") == ("buffers",)  # a model the config does not list


@pytest.mark.parametrize("text, message", [
    ("allow_mutations: buffers\n", "graphtool.yaml:1: allow_mutations: must be list, got str"),
    ("allow_mutations: [buffer]\n", "graphtool.yaml:1: allow_mutations.0: 'buffer' is not a kind: did you mean 'buffers'?"),
    ("models:\n  - path: mlp.py\n    allow_mutations:\n      - 3\n", "graphtool.yaml:4: models.0.allow_mutations.0: must be a kind"),
    ("allow_mutations: ['']\n", "allow_mutations.0: must be a kind (buffers, parameters, user_inputs, inputs, optimizer_state) or an FQN pattern"),
])
def test_bad_values_name_file_line_and_key(tmp_path, text, message):
    with pytest.raises(ConfigError) as info:
        load_config(_project(tmp_path, text) / "graphtool.yaml")
    assert message in info.value.message


def test_check_accepts_what_the_config_allows(cli, tmp_path, monkeypatch):
    monkeypatch.chdir(_project(tmp_path, "models:\n  - convnet_bn.py\n"))
    rc, out, _ = cli("mutations", "--check")
    assert rc == 1 and "bn.running_mean" in out
    (tmp_path / "graphtool.yaml").write_text("models:\n  - path: convnet_bn.py\n    allow_mutations: [buffers]\n")
    rc, out, _ = cli("mutations", "--check")
    assert rc == 0 and "accepted by --allow buffers" in out


def test_config_default_applies_to_a_model_named_on_the_command_line(cli, tmp_path, monkeypatch):
    monkeypatch.chdir(_project(tmp_path, "allow_mutations: ['bn.running_*', 'bn.num_batches_tracked']\n"))
    rc, _, _ = cli("mutations", "convnet_bn.py", "--check")
    assert rc == 0
    (tmp_path / "graphtool.yaml").write_text("allow_mutations: ['bn.running_*']\n")  # num_batches_tracked not accepted
    rc, _, _ = cli("mutations", "convnet_bn.py", "--check")
    assert rc == 1
    rc, _, _ = cli("mutations", "convnet_bn.py", "--check", "--allow", "*.num_batches_tracked")  # the CLI adds to it
    assert rc == 0


def test_a_star_dot_pattern_accepts_a_top_level_buffer(cli):
    # '*.steps' is how the README writes a buffer pattern; the buffer here is at the top: FQN 'steps'
    from tests.helpers import FIXTURES

    rc, out, _ = cli("mutations", FIXTURES / "stateful_buffer.py", "--check", "--allow", "*.steps")
    assert rc == 0 and "accepted by --allow *.steps: steps" in out
