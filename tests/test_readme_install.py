"""The README's install commands for a clone pin torch: without ``-c constraints.txt`` pip may pull a
CUDA torch. Only a command the README says is for an environment that has its own torch goes without."""

from __future__ import annotations

import re

from tests.helpers import ROOT


def test_every_install_from_the_clone_uses_the_constraints_file():
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    unpinned = []
    for n, line in enumerate(text.splitlines(), 1):
        for command in re.findall(r"pip install[^`\n]*", line):
            if re.search(r"\s-e\s", command + " ") and "-c constraints.txt" not in command \
                    and not re.search(r"(without the|and no) constraints file", line):
                unpinned.append(f"README.md:{n}: {command.strip()}")
    assert unpinned == []


def test_the_install_hint_for_an_extra_uses_the_constraints_file():
    from graphtool.capture.user.boundary import missing_package_hint

    hint = missing_package_hint(ModuleNotFoundError("No module named 'transformers'", name="transformers"))
    assert "in a clone: pip install -c constraints.txt -e '.[examples]'" in hint
