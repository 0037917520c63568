"""Every command on models written for issue 24 (tests/fixtures/issue24): a 3-D nn.Linear, a decoder
step writing a caller-owned KV cache under @torch.no_grad(), the same step called by a plain function
through a module-level nn.Module, and a model with torch.cond."""

from __future__ import annotations

import json

import pytest

from tests.helpers import FIXTURES

HERE = FIXTURES / "issue24"
LIN3D = str(HERE / "lin3d.py")
KV_DECODE = str(HERE / "kv_decode.py")
KV_FUNCTION = str(HERE / "kv_function.py")
COND = str(HERE / "cond_model.py")


def test_linear_on_3d_input_is_no_alias_finding(cli):
    """The view inside linear's decomposition is no output alias (AOT: non_alias): --check passes."""
    rc, out, err = cli("mutations", LIN3D, "--check", "--inference")
    assert "GT-M003" not in out + err
    assert rc == 0, out + err


def test_kv_cache_check_passes_once_the_caches_are_allowed(cli):
    rc, out, err = cli("mutations", KV_DECODE, "--check", "--allow", "k_cache", "--allow", "v_cache")
    assert rc == 0, out + err


@pytest.mark.slow
def test_a_function_over_a_global_module_runs_everywhere(cli, tmp_path):
    """The global module's parameters move to the stand-in, and are named and counted as the model's."""
    for command in (("devices",), ("cudagraphs",), ("render", "--graph", "forward", "-o", tmp_path / "f.svg")):
        rc, out, err = cli(*command, KV_FUNCTION)
        assert rc in (0, 1), f"{command}: rc {rc}\n{out}{err}"
        assert "not on the expected device" not in out + err
    rc, out, err = cli("trace", KV_FUNCTION, "--format", "json")
    assert rc == 0, err
    (graph,) = json.loads(out)["graphs"]
    named = {p["name"]: p["kind"] for p in graph["forward"]["placeholders"]}
    assert named["_step.qkv.weight"] == "parameter" and named["_step.out.bias"] == "parameter"
    assert not [n for n in named if n.startswith("g_")]
    rc, out, _ = cli("memory", KV_FUNCTION, "--format", "json")
    assert json.loads(out)["memory"]["parameters"]["tensors"] == 4
