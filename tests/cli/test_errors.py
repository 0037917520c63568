"""Every bad input exits 2 with a message naming the file and line, and no graphtool traceback."""

from __future__ import annotations

import pytest

from tests.helpers import FIXTURES

BAD = FIXTURES / "bad"


def _assert_clean(err: str) -> None:
    assert "Traceback (most recent call last)" not in err
    assert "graphtool/capture" not in err and "graphtool/cli" not in err


@pytest.mark.parametrize(
    "script, expected",
    [
        ("syntax_error.py", "syntax_error.py:3: syntax error"),
        ("import_error.py", "import_error.py:2: importing import_error.py failed: ModuleNotFoundError"),
        ("no_model.py", "no model found"),
        ("wrong_shape.py", "wrong_shape.py:4: get_model_and_inputs() must return (model, example_inputs)"),
        ("forward_raises.py", "forward_raises.py:11: the model raised on its example inputs: RuntimeError"),
        ("bad_inputs.py", "example_inputs must be a tuple of positional arguments or a tensor, got str"),
        ("factory_raises.py", "factory_raises.py:6: get_model_and_inputs() raised: KeyError"),
        ("not_callable.py", "the model is a int, not an nn.Module or callable"),
        ("exits.py", "called sys.exit(3)"),
    ],
)
@pytest.mark.parametrize("command", [["trace"], ["bench", "--compile", "none", "--iters", "1", "--repeat", "1"]],
                         ids=["trace", "bench"])
def test_bad_script_exits_2_naming_file_and_line(cli, script, expected, command):
    rc, out, err = cli(command[0], BAD / script, *command[1:])
    assert rc == 2
    if command[0] == "bench":  # bench's eager run says which run failed
        expected = expected.replace("on its example inputs", "in eager mode on the example inputs or a fresh draw of them")
    assert expected in err
    assert out == ""
    _assert_clean(err)


def test_no_model_lists_names_looked_for_and_found(cli):
    rc, _, err = cli("trace", BAD / "no_model.py")
    assert rc == 2
    assert "get_model_and_inputs()" in err and "'model' and 'example_inputs'" in err
    assert "the script defines:" in err and "inputs" in err and "net" in err


def test_missing_file(cli, tmp_path):
    rc, _, err = cli("trace", tmp_path / "nope.py")
    assert rc == 2 and "nope.py: no such file" in err


def test_directory_is_not_a_script(cli, tmp_path):
    rc, _, err = cli("trace", tmp_path)
    assert rc == 2 and "is a folder" in err


def test_unknown_entry_lists_names(cli):
    rc, _, err = cli("trace", BAD / "no_model.py", "--entry", "build")
    assert rc == 2 and "no function named 'build'" in err and "net" in err


def test_bad_format_is_a_usage_error(cli):
    rc, _, err = cli("trace", BAD / "no_model.py", "--format", "xml")
    assert rc == 2 and "--format 'xml'" in err


def test_debug_shows_the_full_traceback(cli):
    rc, _, err = cli("--debug", "trace", BAD / "forward_raises.py")
    assert rc == 2
    assert "Traceback (most recent call last)" in err


def test_unknown_option_exits_2(cli):
    rc, _, _ = cli("trace", "--no-such-option")
    assert rc == 2


def test_internal_bug_exits_3(cli, monkeypatch):
    import graphtool.analysis.trace_report as report

    def boom(capture):
        raise ValueError("simulated bug")

    monkeypatch.setattr(report, "build_trace_report", boom)
    from tests.helpers import example

    rc, _, err = cli("trace", example("mlp.py"))
    assert rc == 3
    assert "this is a bug in graphtool" in err


def test_commands_use_the_config_models_when_given_no_model(cli, tmp_path, monkeypatch):
    import json

    from tests.helpers import EXAMPLES

    (tmp_path / "graphtool.yaml").write_text(
        f"models:\n  - path: {EXAMPLES / 'mlp.py'}\n  - path: {EXAMPLES / 'convnet_bn.py'}\n"
    )
    monkeypatch.chdir(tmp_path)
    rc, out, _ = cli("mutations", "--format", "json")
    docs = json.loads(out)["models"]
    assert rc == 0 and [d["model"]["path"].split("/")[-1] for d in docs] == ["mlp.py", "convnet_bn.py"]
    assert docs[1]["verdict"] == "3 buffers mutated"
    rc, out, _ = cli("trace", "--format", "json")
    assert rc == 0 and len(json.loads(out)["models"]) == 2


def test_bad_config_stops_every_command(cli, tmp_path, monkeypatch):
    (tmp_path / "graphtool.yaml").write_text("modelz: []\n")
    monkeypatch.chdir(tmp_path)
    rc, _, err = cli("trace")
    assert rc == 2 and "graphtool.yaml:1: modelz: unknown key" in err


@pytest.mark.parametrize("args, message", [
    (["--device", "nonsense"], "--device 'nonsense' is not a torch device"),
    (["--device", "cuda:0"], "no CUDA device is present"),
])
def test_bad_device(cli, args, message):
    import torch

    from tests.helpers import example

    if "cuda" in args[1] and torch.cuda.is_available():
        pytest.skip("a CUDA device is present")
    rc, _, err = cli("trace", example("mlp.py"), *args)
    assert rc == 2 and message in err


@pytest.mark.slow  # over 6 s: the slow tier (docs/ci.md)
def test_unwritable_outputs_exit_2(cli, tmp_path):
    from tests.helpers import example

    blocker = tmp_path / "file"
    blocker.write_text("x")
    for args in (["trace", example("mlp.py"), "--out", blocker],
                 ["render", example("mlp.py"), "-o", blocker / "x.svg"],
                 ["lint", example("mlp.py"), "--output", blocker / "r.json"]):
        rc, _, err = cli(*args)
        assert rc == 2 and "is a file, not a folder" in err, err
        _assert_clean(err)


def test_unknown_compile_backend(cli):
    from tests.helpers import example

    rc, _, err = cli("bench", example("mlp.py"), "--compile", "nosuchbackend")
    assert rc == 2 and "neither a torch.compile mode nor a backend" in err and "aot_eager" in err


def test_unknown_cudagraphs_backend_is_refused_before_tracing(cli, monkeypatch):
    from graphtool.commands.session import Session
    from tests.helpers import example

    def must_not_trace(*a, **k):
        raise AssertionError("traced before checking --cudagraphs")

    monkeypatch.setattr(Session, "trace_spec", must_not_trace)
    rc, _, err = cli("trace", example("mlp.py"), "--cudagraphs", "bogus")
    assert rc == 2 and "--backend 'bogus' is not one of inductor, cudagraphs" in err
