"""`lint --run script.py -- ARGS`: a script that rejects its arguments is reported in its own words."""

from __future__ import annotations

import pytest

from tests.reliability.conftest import write

ARGPARSE = """\
    import argparse
    import torch

    parser = argparse.ArgumentParser()
    parser.add_argument("--lr", type=float, default=0.1)
    args = parser.parse_args()
    torch.compile(torch.nn.Linear(4, 4))(torch.randn(2, 4))
    """


def test_the_scripts_own_argparse_message_is_shown(cli, tmp_path):
    script = write(tmp_path / "train.py", ARGPARSE)
    rc, out, err = cli("lint", "--run", script, "--", "--bogus")
    assert rc == 2
    text = " ".join((out + err).split())
    assert "the script exited with status 2: train.py: error: unrecognized arguments: --bogus" in text  # was only "status 2"


@pytest.mark.slow  # over 5 s (a script run in its own process)
def test_the_scripts_arguments_reach_it(cli, tmp_path):
    script = write(tmp_path / "train.py", ARGPARSE)
    rc, out, err = cli("lint", "--run", script, "--", "--lr", "0.5")
    assert rc == 0, out + err
