"""One launch interface: plain, ``--ddp`` and ``--fsdp2`` are three implementations of
:class:`graphtool.commands.launch.Launch`, chosen once from checked, frozen settings, and no command branches on
which it has (issue 33). What each launch does to a model is checked by the commands' own tests
(tests/capture/test_distributed.py, test_fsdp2.py, the truth suites); these check the choice and the seam.
"""

from __future__ import annotations

import ast
import dataclasses
from pathlib import Path

import pytest

import graphtool.commands
from graphtool.commands.launch import Ddp, DdpPart, Fsdp2, Fsdp2Part, Plain, launch_of
from graphtool.errors import UsageError

COMMANDS = Path(graphtool.commands.__file__).parent


def test_the_settings_choose_one_launch_once_and_it_cannot_change():
    assert launch_of(None, None) == Plain()
    ddp = launch_of({"world_size": 8, "bucket_cap_mb": 5, "find_unused_parameters": True}, None)
    assert ddp == Ddp(world_size=8, bucket_cap_mb=5.0, find_unused_parameters=True)
    assert launch_of({"world_size": 4}, None) == Ddp(world_size=4, bucket_cap_mb=25.0)  # DDP's own default cap
    assert launch_of(None, {"world_size": 4}) == Fsdp2(world_size=4)
    assert launch_of(ddp, None) is ddp  # a launch already chosen is taken as it is
    with pytest.raises(dataclasses.FrozenInstanceError):
        ddp.world_size = 2
    assert [x.part("R") for x in (Plain(), ddp, Fsdp2())] == [None, DdpPart("R"), Fsdp2Part("R")]
    assert [p.key for p in (ddp.part("R"), Fsdp2().part("R"))] == ["ddp", "fsdp2"]
    assert [x.own_steps for x in (Plain(), ddp, Fsdp2())] == [1, 2, 1]  # DDP fails at the second step, if at all


@pytest.mark.parametrize(("ddp", "fsdp2", "device", "said"), [
    ({"world_size": 2}, {"world_size": 2}, None, "--fsdp2 with --ddp: a model runs under one of them, not both"),
    ({"world_size": 0}, None, None, "--world-size 0: a process group needs at least one rank"),
    (None, {"world_size": -1}, None, "--world-size -1: a process group needs at least one rank"),
    ({"world_size": 2}, None, "meta", "--ddp cannot run on --device meta: DDP's constructor reads the parameters'"),
    (None, {"world_size": 2}, "meta", "--fsdp2 cannot run on --device meta: fully_shard copies each parameter's"),
])
def test_bad_settings_are_one_error_whichever_door_they_came_through(ddp, fsdp2, device, said):
    with pytest.raises(UsageError) as err:
        launch_of(ddp, fsdp2, device)
    assert err.value.message.startswith(said)
    assert err.value.hint


def test_what_a_command_cannot_do_under_a_wrapper_is_said_by_the_launch():
    Plain().check("memory", dynamic=True)
    with pytest.raises(UsageError, match=r"^memory --fsdp2 with --dynamic: not supported yet"):
        Fsdp2().check("memory", dynamic=True)
    with pytest.raises(UsageError, match=r"^--ddp lints a model script; a script run with --run wraps its model itself"):
        Ddp().check("lint", run=True)
    Ddp().check("lint", run=False)


def _branches_on_the_wrapper(path: Path) -> list[str]:
    """``if``s and conditional expressions in ``path`` whose test reads ``ddp`` or ``fsdp2``: the settings, or a
    result's field (``self.ddp``): what the wrapper did is a part that renders itself (``launch.Part``)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, (ast.If, ast.IfExp)):
            names = {n.id for n in ast.walk(node.test) if isinstance(n, ast.Name)}
            names |= {n.attr for n in ast.walk(node.test) if isinstance(n, ast.Attribute)}
            if names & {"ddp", "fsdp2", "ddp_report", "fsdp2_report"}:
                found.append(f"{path.name}:{node.lineno}")
    return found


def test_no_command_and_no_view_branches_on_which_launch_it_has():
    """The launch is chosen once (launch.py); commands, their results, the renderers and the CLI ask its interface."""
    package = COMMANDS.parent
    files = sorted(p for p in COMMANDS.glob("*.py") if p.name != "launch.py")
    files += sorted((package / "render").glob("*.py")) + sorted((package / "cli").glob("*.py")) + [package / "api.py"]
    assert len(files) > 40
    assert [hit for f in files for hit in _branches_on_the_wrapper(f)] == []


def test_the_check_above_sees_such_a_branch(tmp_path):
    bad = tmp_path / "cmd.py"
    bad.write_text("def f(ddp, fsdp2, r):\n    if fsdp2 is not None:\n        return 1\n    return 2 if ddp or r.ddp else 3\n")
    assert _branches_on_the_wrapper(bad) == ["cmd.py:2", "cmd.py:4"]
