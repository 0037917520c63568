"""The README's first screen shows a new user how to run graphtool on their own model (issue 44): the script
convention and the Python API within its first 150 lines, the distribution's real name, and no development
history (this project's own CI budget and work periods live in docs/development.md and docs/ci.md)."""

from __future__ import annotations

import re

from tests.helpers import ROOT

README = (ROOT / "README.md").read_text(encoding="utf-8")
FIRST = "\n".join(README.splitlines()[:150])


def _blocks(text: str, lang: str) -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", text, re.S)


def test_the_first_150_lines_show_the_script_convention_and_a_command_on_it():
    scripts = [b for b in _blocks(FIRST, "python") if "def get_model_and_inputs" in b]
    assert scripts, "get_model_and_inputs() is not shown in the README's first 150 lines"
    commands = [ln for b in _blocks(FIRST, "bash") for ln in b.splitlines() if re.match(r"graphtool \w+ \S+\.py", ln)]
    assert commands, "no graphtool command on a script in the first 150 lines"


def test_the_first_150_lines_show_the_python_api_on_a_model_object():
    api = [b for b in _blocks(FIRST, "python") if "graphtool.trace(" in b and "import graphtool" in b.replace("torch, ", "")]
    assert api, "the Python API (graphtool.trace(model, x)) is not shown in the first 150 lines"


def test_the_install_names_the_distribution_and_says_where_the_pin_matters():
    assert "torch-graphtool" in FIRST
    said = " ".join(FIRST.replace("`", "").split())
    assert "pip install graphtool installs an unrelated package" in said  # PyPI's graphtool is from 2008
    assert "CPU wheel here" not in README  # "here" was this project's machine, unsaid


def test_no_development_history_in_the_readme():
    assert not re.search(r"\bsession\b", README)  # which work period a number came from
    assert "35-minute" not in README and "clean-clone" not in README  # this project's own CI budget and runs


def test_the_commands_table_leaves_a_place_for_new_commands():
    table = README.split("## Commands", 1)[1].split("### ", 1)[0]
    assert "new command" in table.lower() and "add" in table.lower()
