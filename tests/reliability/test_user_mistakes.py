"""D. A mistake in the user's script, config or baseline is exit 2 with the file and line, never
exit 3 with graphtool's own frames."""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET

import pytest

from tests.helpers import example
from tests.reliability.conftest import assert_clean, write

MLP = """
import torch


class MLP(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(4, 4)

    def forward(self, x):
        return self.fc(x)
"""

SCRIPTS = {
    # name: (source, the message, with the file's name and line)
    "model_is_a_class": (MLP + "\n\nmodel = MLP\nexample_inputs = (torch.randn(2, 4),)\n",
                         "model_is_a_class.py:13: the model is the class MLP, not an instance of it"),
    "factory_returns_a_class": (MLP + "\n\ndef get_model_and_inputs():\n    return MLP, (torch.randn(2, 4),)\n",
                                "factory_returns_a_class.py:13: the model is the class MLP, not an instance of it"),
    "module_getattr_raises": ("import torch\n\n\ndef __getattr__(name):\n    raise RuntimeError('lazy ' + name)\n",
                              "module_getattr_raises.py:5: looking up 'get_model_and_inputs' through "
                              "module_getattr_raises.py's module __getattr__ raised: RuntimeError: lazy get_model_and_inputs"),
    "system_exit": ("import torch\n\nraise SystemExit('bye')\n",
                    "system_exit.py:3: importing system_exit.py failed: the script called sys.exit('bye')"),
    "sys_exit_in_factory": ("import sys\n\n\ndef get_model_and_inputs():\n    sys.exit(4)\n",
                            "sys_exit_in_factory.py:5: get_model_and_inputs() raised: the script called sys.exit(4)"),
    "argparse_required": ("import argparse\n\nimport torch\n\np = argparse.ArgumentParser()\np.add_argument('--data', required=True)\n"
                          "args = p.parse_args()\n",
                          "argparse_required.py:7: importing argparse_required.py failed: the script called sys.exit(2)"),
    "generator_inputs": ("import torch\n\nmodel = torch.nn.Linear(4, 4)\nexample_inputs = (torch.randn(2, 4) for _ in range(1))\n",
                         "generator_inputs.py:4: example_inputs must be a tuple of positional arguments or a tensor, got generator"),
    "factory_needs_arguments": ("import torch\n\n\ndef get_model_and_inputs(size):\n    return None\n",
                                "factory_needs_arguments.py:4: get_model_and_inputs() raised: TypeError"),
    "factory_not_callable": ("import torch\n\nget_model_and_inputs = 5\n",
                             "factory_not_callable.py:3: get_model_and_inputs is a int, not a function"),
    "module_parameters_attribute": ("import torch\n\nmodel = torch.nn.Linear(4, 4)\nmodel.parameters = [1]\n"
                                    "example_inputs = (torch.randn(2, 4),)\n",
                                    "module_parameters_attribute.py:3: the model (a Linear) has .parameters = a list, not a method"),
    "deeply_nested_source": ("x = " + "(" * 5000 + ")" * 5000 + "\n", "deeply_nested_source.py"),
}


@pytest.mark.parametrize("name", sorted(SCRIPTS))
def test_bad_script_is_exit_2_at_its_file_and_line(cli, tmp_path, name):
    source, message = SCRIPTS[name]
    script = write(tmp_path / f"{name}.py", source)
    rc, out, err = cli("trace", script, "--format", "json")
    assert rc == 2, err
    assert message in err, err
    assert out == ""
    assert_clean(err)


# -- messages that name the user's file and line, even when torch's own code raised ---------------------


def test_a_shape_mismatch_names_the_model_and_the_inputs_lines_and_shapes(cli, tmp_path):
    """Was: "the model raised on its example inputs: RuntimeError: mat1 and mat2 shapes cannot be
    multiplied (2x5 and 4x4)", no file, no line (the failing frame is torch's, not the user's)."""
    script = write(tmp_path / "shapes.py", """
        import torch

        model = torch.nn.Linear(4, 4)
        example_inputs = (torch.randn(2, 5),)
    """)
    for command in ("trace", "render", "memory"):
        rc, out, err = cli(command, script, *(["-o", tmp_path / "x.svg"] if command == "render" else []))
        assert rc == 2, err
        # torch 2.15 prefixes the op ("RuntimeError: addmm: mat1 and mat2 shapes ...")
        assert re.search(re.escape(f"{script}:4: the model raised on its example inputs: RuntimeError: ") + r"(addmm: )?mat1 and mat2 shapes",
                         err), err
        assert f"model: a Linear, defined at {script}:3" in err
        assert f"example_inputs, defined at {script}:4:" in err and "[0]: float32[2, 5] on cpu" in err
        assert out == ""
        assert_clean(err)


def test_a_factory_model_failing_in_torch_names_the_factory(cli, tmp_path):
    script = write(tmp_path / "factory.py", """
        import torch


        def get_model_and_inputs():
            return torch.nn.Linear(4, 4), (torch.randn(3, 2),), {}
    """)
    rc, _, err = cli("trace", script)
    assert rc == 2 and f"{script}:4: the model raised on its example inputs" in err, err
    assert f"model: a Linear, from get_model_and_inputs() at {script}:4" in err and "[0]: float32[3, 2] on cpu" in err


def test_a_model_the_script_built_on_meta_names_the_script(cli, tmp_path):
    script = write(tmp_path / "on_meta.py", """
        import torch

        model = torch.nn.Linear(4, 4, device="meta")
        example_inputs = (torch.randn(2, 4),)
    """)
    rc, _, err = cli("trace", script, "--device", "cpu")
    assert rc == 2, err
    assert f"{script}:4: the model raised on its example inputs" in err, err
    assert "hint: the model's parameters are on meta and its example inputs on cpu" in err
    assert_clean(err)


PLAIN_CALLABLES = {
    "parameters_dict": "class Scale:\n    parameters = {'factor': 2.0}\n\n    def __call__(self, x):\n"
                       "        return x * self.parameters['factor']\n\n\nmodel = Scale()\n",
    "parameters_list": "def f(x):\n    return x * 2\n\n\nf.parameters = [1, 2]\nmodel = f\n",
    "parameters_raises": "class M:\n    def __call__(self, x):\n        return x + 1\n\n    def parameters(self):\n"
                         "        raise ValueError('no')\n\n\nmodel = M()\n",
    "forward_dict": "class F:\n    forward = {'scale': 3.0}\n\n    def __call__(self, x):\n"
                    "        return x * self.forward['scale']\n\n\nmodel = F()\n",
}


@pytest.mark.parametrize("name", sorted(PLAIN_CALLABLES))
def test_a_plain_callable_is_not_judged_by_its_attribute_names(cli, tmp_path, name):
    """Was: exit 2, "the model (a Scale) has .parameters = a dict, not a method": graphtool guessed an
    nn.Module from an attribute's name. Only an nn.Module is asked for its parameters."""
    script = write(tmp_path / f"{name}.py", "import torch\n\n\n" + PLAIN_CALLABLES[name]
                   + "example_inputs = (torch.randn(2, 4),)\n")
    rc, out, err = cli("trace", script, "--format", "json")
    assert rc == 0, err
    assert json.loads(out)["model"]["path"] == str(script)


def test_argparse_at_import_sees_no_graphtool_options(cli, tmp_path):
    script = write(tmp_path / "m.py", """
        import argparse
        import sys

        import torch

        args = argparse.ArgumentParser().parse_args()  # no options of its own: graphtool's would be an error
        assert sys.argv == [__file__], sys.argv
        model = torch.nn.Linear(4, 4)
        example_inputs = (torch.randn(2, 4),)
    """)
    rc, out, err = cli("trace", script, "--format", "json", "--inference")
    assert rc == 0, err
    assert json.loads(out)["model"]["path"] == str(script)


@pytest.mark.parametrize("name, message", [("model", "no such file"), ("model.txt", "not a Python script (the name does not end in .py)")])
def test_a_path_that_is_not_a_py_file(cli, tmp_path, name, message):
    write(tmp_path / "model.txt", "import torch\n")
    write(tmp_path / "model.py", "import torch\n")
    rc, _, err = cli("trace", tmp_path / name)
    assert rc == 2 and message in err
    if name == "model":
        assert "did you mean" in err and "model.py" in err
    assert_clean(err)


def test_lint_reports_the_same_mistakes_at_file_and_line(cli, tmp_path):
    bad = write(tmp_path / "cls.py", SCRIPTS["model_is_a_class"][0])
    rc, out, err = cli("lint", bad, "--format", "json")
    m = json.loads(out)["models"][0]
    assert rc == 2 and m["status"] == "error" and "cls.py:13: the model is the class MLP" in m["error"]
    assert_clean(err)


# -- config and baseline files ----------------------------------------------------------------------

OK_MODEL = "import torch\nmodel = torch.nn.Linear(2, 2)\nexample_inputs = (torch.randn(1, 2),)\n"


@pytest.mark.parametrize("name, content, message", [
    ("graphtool.yaml", b"models: [m.py]\n# caf\xe9\n", "graphtool.yaml:2: not UTF-8 text (byte 0xe9)"),
    ("graphtool.yaml", b"models:\n  - path: m.py\n    allowed_breaks: " + b"[" * 200 + b"]" * 200 + b"\n", "graphtool.yaml:3: nested too deeply"),
    ("graphtool.yaml", b"models:\n  - path: \"m\\0.py\"\n", "graphtool.yaml:2: models.0.path: no such file"),
    ("pyproject.toml", b"[tool.graphtool]\nmodels = ['m.py']\nname = 'caf\xe9'\n", "pyproject.toml:3: not UTF-8 text (byte 0xe9)"),
    ("pyproject.toml", b"[tool.graphtool]\nmodels = " + b"[" * 100_000 + b"]" * 100_000 + b"\n", "pyproject.toml: nested too deeply"),
])
def test_bad_config_files(cli, tmp_path, monkeypatch, name, content, message):
    write(tmp_path / "m.py", OK_MODEL)
    write(tmp_path / name, content)
    monkeypatch.chdir(tmp_path)
    for command in (["lint"], ["trace", "--format", "json"]):
        rc, out, err = cli(*command)
        assert rc == 2 and message in err, (command, err)
        assert out == ""
        assert_clean(err)


def test_a_pyproject_that_is_not_utf8_and_not_ours_is_ignored(cli, tmp_path, monkeypatch):
    write(tmp_path / "pyproject.toml", b"[project]\nname = 'caf\xe9'\n")
    monkeypatch.chdir(tmp_path)
    rc, _, err = cli("lint")
    assert rc == 2 and "nothing to lint" in err
    assert_clean(err)
    rc, out, err = cli("trace", example("mlp.py"), "--format", "json", "--inference")
    assert rc == 0, err


ENTRY = {"model": "m.py", "file": "m.py", "kind": "gb0059", "source_text": "x", "line": 6, "reason": "r"}


@pytest.mark.parametrize("content, message", [
    (b'{"version": 2, "breaks": [\n  {"model": "m.py", "kind": "k"},\n  "print"\n]}\n', "b.json:3: breaks[1]: each entry must be an object, got string"),
    (b'{"version": 2, "breaks": [\n  {"file": "m.py", "kind": "k"}\n]}\n', "b.json:2: breaks[0]: 'model' missing"),
    (b'{"version": 2, "breaks": [\n  {"model": "m.py", "kind": 7}\n]}\n', "b.json:2: breaks[0]: 'kind' must be a string, got number"),
    (b'{"version": 2, "breaks": [' + json.dumps(dict(ENTRY, line="six")).encode() + b"]}", "b.json:1: breaks[0]: 'line' must be a number or null, got string"),
    (b'{"version": 2, "breaks": [null]}', "breaks[0]: each entry must be an object, got null"),
    (b'{"version": 9, "breaks": []}', "b.json: written by a newer graphtool: baseline version 9, this graphtool reads versions 1, 2"),
    (b'{"version": true, "breaks": []}', "b.json: not a graphtool baseline"),
    (b'{"version": "2", "breaks": []}', "b.json: not a graphtool baseline"),
    (b'[]', "b.json: not a graphtool baseline"),
    (b'{"version": 2, "breaks": []}\n\xff\n', "b.json:2: not UTF-8 text (byte 0xff)"),
    (b'{"version": 2, "breaks": ' + b"[" * 100_000 + b"]" * 100_000 + b"}", "b.json: not a graphtool baseline: nested too deeply"),
])
def test_bad_baseline_files(cli, tmp_path, content, message):
    write(tmp_path / "b.json", content)
    rc, out, err = cli("lint", example("mlp.py"), "--baseline", tmp_path / "b.json")
    assert rc == 2 and message in err, err
    assert out == ""
    assert_clean(err)


@pytest.mark.slow  # over 8 s: the slow tier (docs/ci.md)
def test_junit_stays_well_formed_xml_with_control_characters(cli, tmp_path):
    script = write(tmp_path / "ctl.py", "import torch\n\nraise RuntimeError('bell \\x07 escape \\x1b[31m nul \\x00 end')\n")
    rc, out, err = cli("lint", script, example("mlp.py"), "--format", "junit")
    assert rc == 2
    root = ET.fromstring(out)  # raises on a control character
    error = root.find(".//testcase/error")
    assert "ctl.py:3" in error.get("message") and "bell \\x07 escape \\x1b[31m nul \\x00 end" in error.get("message")
    report = tmp_path / "junit.xml"
    rc, _, _ = cli("lint", script, "--format", "junit", "--output", report)
    assert rc == 2 and ET.parse(report).getroot().find(".//testcase/error") is not None


def test_a_baseline_from_a_newer_graphtool_is_refused_not_misread(cli, tmp_path):
    """Future-version files: a baseline one version ahead was read as an older one (exit 1, every
    break "new"); it is refused naming the file and the version, and left as it is."""
    from graphtool.analysis.lint import BASELINE_VERSION

    content = json.dumps({"version": BASELINE_VERSION + 1, "breaks": [], "added_later": {}}).encode()
    baseline = write(tmp_path / "gb.json", content)
    rc, out, err = cli("lint", example("mlp.py"), "--baseline", baseline)
    assert rc == 2, err
    assert f"gb.json: written by a newer graphtool: baseline version {BASELINE_VERSION + 1}" in err
    assert "hint: upgrade graphtool" in err
    assert out == "" and baseline.read_bytes() == content
    assert_clean(err)


def test_the_api_does_not_judge_a_plain_callable_by_its_attribute_names():
    """graphtool.trace(obj, x) on a callable whose ``parameters`` is a dict (was: TypeError, 'dict' object
    is not callable, when the trace set the model's state aside)."""
    import torch

    import graphtool

    class Scale:
        parameters = {"factor": 2.0}

        def __call__(self, x):
            return x * self.parameters["factor"]

    result = graphtool.trace(Scale(), torch.randn(2, 4))
    assert result.to_dict()["graphs"][0]["forward"]["nodes"] > 0
