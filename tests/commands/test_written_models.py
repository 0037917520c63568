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


def _plain(text: str) -> bool:
    """No torch-internal dump reached the user: no dispatch-mode object addresses, no 'no rule registered'."""
    return " object at 0x" not in text and "There was no rule registered" not in text


def test_memory_through_torch_cond_reports_the_compiled_side_and_why_eager_was_not_measured():
    """A torch.cond whose branch calls a submodule (issue 44, item 10): eager torch.cond does not run under the
    dispatch mode graphtool records autograd's saved tensors with (torch 2.13 and 2.15 trace the branch on fake
    tensors there and refuse the submodule's real parameter), so the eager column is not measured: the compiled
    column is reported, the view, the JSON and the page say eager was not measured and why, at the user's line."""
    from importlib import resources

    import jsonschema

    from graphtool.commands.memory import memory

    (result,) = memory(COND)  # raised GraphtoolBug (exit 3) before; returning, the CLI exits 0
    report = result.report
    assert report.compiled.by_kind["activation"][0] > 0
    assert report.eager.tensors == () and report.eager.bytes == 0
    why = report.eager_not_measured
    assert why.startswith("torch.cond at ") and "cond_model.py:14" in why and "dispatch mode" in why
    doc = result.to_dict()
    assert doc["memory"]["eager_not_measured"] == why
    jsonschema.validate(doc, json.loads(resources.files("graphtool.schema").joinpath("memory.schema.json").read_text()))
    text = result.text(width=80)
    assert report.verdict() == f"activations saved for backward: compiled (inductor) {_bytes(report)}; eager not measured"
    assert "not measured" in text and "note: eager: not measured: torch.cond at" in text and _plain(text)
    assert "eager: not measured: torch.cond at" in result.html()


def _bytes(report) -> str:
    from graphtool.analysis.memory.saved import format_bytes

    return format_bytes(report.compiled.by_kind["activation"][0])


@pytest.mark.slow
def test_torch_cond_in_every_command(cli, tmp_path):
    """torch.cond (a branch calling a submodule) and a data-dependent `if`: every command runs (memory, which
    cannot measure the eager side there, in the test above)."""
    runs = {
        "trace": ("trace",), "mutations": ("mutations",), "devices": ("devices",), "cudagraphs": ("cudagraphs",),
        "render": ("render", "-o", tmp_path / "a.svg"), "render forward": ("render", "--graph", "forward", "-o", tmp_path / "f.svg"),
        "report": ("report", "-o", tmp_path / "r.html"),
    }
    for what, command in runs.items():
        rc, out, err = cli(*command, COND)
        assert rc in (0, 1), f"{what}: rc {rc}\n{out}{err}"
        assert _plain(out + err), f"{what}:\n{out}{err}"


@pytest.mark.slow
def test_while_loop_map_and_nested_regions_in_training(cli):
    for command in ("trace", "devices", "memory"):
        rc, out, err = cli(command, str(HERE / "hops.py"))
        assert rc == 0, f"{command}: rc {rc}\n{out}{err}"
        assert _plain(out + err)


@pytest.mark.slow
def test_flex_attention_on_the_standin_is_said_to_be_graphtools_limit(cli):
    rc, out, err = cli("devices", str(HERE / "hops.py"), "--inference", "--format", "json")
    header = json.loads(out)["model"]
    if header["stopped"]:  # this torch's flex_attention refuses meta tensors
        assert "graphtool cannot yet run flex_attention" in header["stopped"]
        assert err.count("graphtool cannot yet") == 1
        assert json.loads(out)["devices"]["verdict"].startswith("only ")


@pytest.mark.slow
def test_devices_check_does_not_vouch_for_regions_it_never_judged(cli):
    rc, out, _ = cli("devices", COND, "--check", "--format", "json")
    doc = json.loads(out)
    header, verdict = doc["model"], doc["devices"]["verdict"]
    if header["stopped"] or header["regions_judged"] < header["regions_compiled"]:
        assert rc == 1 and verdict.startswith("only ") and "every node runs" not in verdict
    else:
        assert rc == 0 and verdict.startswith("every node runs")


@pytest.mark.slow
def test_cudagraphs_check_does_not_vouch_for_regions_it_never_judged(cli):
    rc, out, _ = cli("cudagraphs", COND, "--check", "--format", "json")
    doc = json.loads(out)
    header, verdict = doc["model"], doc["cudagraphs"]
    if header["stopped"]:
        assert rc == 1 and not verdict["eligible"] and "would be applied" not in verdict["summary"]
        assert "unknown" in verdict["summary"] or "skipped" in verdict["summary"]


def test_cudagraphs_verdict_after_a_stopped_standin_claims_nothing_beyond_the_stop():
    from graphtool.analysis.cudagraphs.verdict import Verdict

    stopped = Verdict("inductor", False, True, 3, (), {}, regions_compiled=1, unjudged="the stand-in stopped at m.py:9")
    assert stopped.summary() == ("CUDA graphs with backend inductor: unknown; 3 regions judged before the stand-in trace "
                                 "stopped, later ones unknown (the stand-in stopped at m.py:9)")
    whole = Verdict("inductor", True, True, 3, (), {}, regions_compiled=3)
    assert whole.summary() == "CUDA graphs would be applied to all 3 regions with backend inductor"


def test_devices_verdict_counts_what_was_judged():
    from graphtool.analysis.devices import DeviceReport, GraphDevices

    one = (GraphDevices(0, "forward", {"meta": 9}, (), ()),)
    partial = DeviceReport("meta", "meta stands for cuda:0", one, regions_compiled=4, regions_judged=1)
    assert not partial.complete
    assert partial.verdict() == ("only 1 of 4 regions judged (1 graph): every node there runs on cuda:0 (predicted); "
                                 "the other regions could not be judged")
    whole = DeviceReport("meta", "meta stands for cuda:0", one, regions_compiled=1, regions_judged=1)
    assert whole.complete and whole.verdict() == "every node runs on cuda:0 (predicted)"
    assert partial.to_dict()["regions_judged"] == 1


def test_mutation_wording_for_a_caller_owned_cache(cli):
    """The KV-cache help says what the graph does (inductor writes the cache inside the graph under
    no_grad) and never advises returning a new tensor for a cache."""
    rc, out, err = cli("mutations", KV_DECODE)
    text = out + err
    assert "return a new tensor instead" not in text
    assert "the compiled graph itself writes the new value into the caller's tensor" in text
    assert "--allow k_cache" in text and "--allow v_cache" in text


def test_one_diagnostic_per_line_and_kind_and_located_aliases():
    """BatchNorm's three statistics at one line are one GT-M001 saying how many; GT-M004 names the
    line that made the aliased inputs."""
    from graphtool.analysis.diagnostics import mutation_diagnostics
    from graphtool.analysis.graph_summary import Source
    from graphtool.analysis.mutations import InputAlias, InputMutation, MutationReport

    src = Source("model.py", 17)
    stats = tuple(InputMutation(f"bn.{n}", "buffer", True, False, False, True, src, (0,))
                  for n in ("num_batches_tracked", "running_mean", "running_var"))
    other = InputMutation("bn2.running_mean", "buffer", True, False, False, True, Source("model.py", 18), (0,))
    report = MutationReport(stats + (other,), (), (InputAlias(("a", "b"), "same_tensor", Source("model.py", 30)),))
    diags = mutation_diagnostics(report)
    m001 = [d for d in diags if d.code == "GT-M001"]
    assert [(d.line, d.message) for d in m001] == [
        (17, "3 buffers mutated in place under no_grad: bn.num_batches_tracked, bn.running_mean, bn.running_var"),
        (18, "buffer bn2.running_mean mutated in place under no_grad"),
    ]
    (m004,) = [d for d in diags if d.code == "GT-M004"]
    assert (m004.path, m004.line) == ("model.py", 30)


def test_output_alias_finding_names_the_line(cli):
    from tests.helpers import example

    rc, out, err = cli("mutations", example("view_outputs.py"))
    assert "<unknown location>" not in out
    assert "view_outputs.py:8:9: GT-M003 output 0 is a view of input x" in out


@pytest.mark.slow
def test_standin_keeps_torchs_autograd_kernel_warning_to_itself(cli):
    """A loss computed from labels (transformers' models do) makes torch warn that nll_loss has no
    autograd kernel, only on graphtool's meta stand-in: the user does not see it."""
    import warnings

    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        rc, out, err = cli("devices", str(HERE / "loss_from_labels.py"))
    assert rc == 0, out + err
    shown = [str(w.message) for w in seen] + [err]
    assert not [m for m in shown if "autograd kernel was not registered" in m]
