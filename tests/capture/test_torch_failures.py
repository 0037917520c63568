"""torch's own failures, named as such: the stage that raised, torch's exception, the user's line nearest
to it, whether ``--backend aot_eager`` gets through, and what AOT had computed before the failure."""

from __future__ import annotations

import pytest

from graphtool.capture.tracer import trace_model
from graphtool.capture.user.script import load_model
from graphtool.errors import EXIT_USAGE, TraceFailed
from tests.helpers import FIXTURES

NO_FAKE = str(FIXTURES / "failures" / "no_fake_kernel.py")


def test_a_custom_op_without_a_fake_kernel_fails_in_dynamo_at_its_call():
    """dynamo's TorchRuntimeError says only "RuntimeError when making fake tensor call": the error it met is
    named too; the line is the op's call in forward (20), not the factory's def; no aot_eager retry (dynamo
    fails the same for every backend) and nothing AOT computed."""
    with pytest.raises(TraceFailed) as info:
        trace_model(load_model(NO_FAKE))
    err = info.value
    assert err.exit_code == EXIT_USAGE
    assert err.message.startswith(f"{NO_FAKE}:20: torch.compile could not trace the model (it runs eagerly; dynamo failed): "
                                  "TorchRuntimeError: RuntimeError when making fake tensor call; got RuntimeError: "
                                  "There was no fake impl registered for <CustomOpDef(graphtool_fixture::scale_no_fake)>")
    assert "aot_eager" not in err.hint and err.detail is None


def test_cli_exits_2_naming_line_stage_and_torchs_exception(cli):
    rc, out, err = cli("trace", NO_FAKE)
    assert rc == 2 and out == ""
    assert f"graphtool: error: {NO_FAKE}:20: " in err and "dynamo failed" in err and "no fake impl registered" in err
