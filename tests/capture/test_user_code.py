"""The one boundary between user code and graphtool: every exception user code can raise is mapped.

httpx's test_exceptions.py is the model: each foreign exception type is raised through the boundary
and the test checks what comes out."""

from __future__ import annotations

import textwrap

import pytest

from graphtool.capture.user.boundary import running_user_code
from graphtool.capture.user.script import load_model
from graphtool.errors import EXIT_USAGE, GraphtoolError, ScriptNotFound, UsageError, UserCodeFailed


class CustomBase(BaseException):
    """A BaseException that is not an Exception, as some libraries define."""


FOREIGN = [
    ValueError("bad value"),
    TypeError("bad type"),
    RuntimeError("mat1 and mat2 shapes cannot be multiplied (2x3 and 4x5)"),
    AttributeError("'NoneType' object has no attribute 'shape'"),
    KeyError("missing"),
    IndexError("out of range"),
    ImportError("cannot import name 'x'"),
    ModuleNotFoundError("No module named 'transformers'"),
    AssertionError("shape check"),
    NotImplementedError("todo"),
    ZeroDivisionError("division by zero"),
    RecursionError("maximum recursion depth exceeded"),
    MemoryError(),
    OSError(2, "No such file or directory"),
    UnicodeDecodeError("utf-8", b"\xff", 0, 1, "invalid start byte"),
    StopIteration(),
    GeneratorExit(),
    CustomBase("library-specific"),
    SystemExit(3),
    SystemExit(0),
]


@pytest.mark.parametrize("exc", FOREIGN, ids=lambda e: type(e).__name__ + (f"({e.code})" if isinstance(e, SystemExit) else ""))
def test_every_foreign_exception_becomes_a_user_error(exc):
    with pytest.raises(UserCodeFailed) as info:
        with running_user_code("running the model", where="m.py"):
            raise exc
    err = info.value
    assert err.exit_code == EXIT_USAGE
    assert "running the model" in err.message
    if isinstance(exc, SystemExit):
        assert f"sys.exit({exc.code})" in err.message
    else:
        assert type(exc).__name__ in err.message
        assert err.full_traceback and type(exc).__name__ in err.full_traceback


def test_keyboard_interrupt_stays_an_interrupt():
    with pytest.raises(KeyboardInterrupt):
        with running_user_code("importing m.py"):
            raise KeyboardInterrupt


@pytest.mark.parametrize("err", [UsageError("bad option"), ScriptNotFound("m.py: no such file"), GraphtoolError("bug")])
def test_graphtool_errors_pass_through_unchanged(err):
    with pytest.raises(type(err)) as info:
        with running_user_code("calling the factory"):
            raise err
    assert info.value is err


@pytest.mark.parametrize("body, expect", [
    ("raise ValueError('bad')", "ValueError: bad"),
    ("import definitely_missing_module_xyz", "ModuleNotFoundError"),
    ("class B(BaseException): pass\nraise B('odd')", "B: odd"),
    ("import sys\nsys.exit(4)", "sys.exit(4)"),
])
def test_script_failures_name_the_file_and_line(tmp_path, body, expect):
    script = tmp_path / "model.py"
    script.write_text("x = 1\n" + textwrap.dedent(body) + "\n")
    with pytest.raises(UserCodeFailed) as info:
        load_model(script)
    msg = info.value.message
    assert expect in msg
    assert str(script) in msg
    if "sys.exit" not in body:  # the user's frame: the line that raised
        assert f"{script}:{1 + body.count(chr(10)) + 1}" in msg


def test_factory_failure_names_the_factory(tmp_path):
    script = tmp_path / "model.py"
    script.write_text("def get_model_and_inputs():\n    return {}['model']\n")
    with pytest.raises(UserCodeFailed) as info:
        load_model(script)
    assert f"{script}:2: get_model_and_inputs() raised: KeyError" in info.value.message


def test_a_compile_failure_is_placed_at_the_users_frame_dynamo_names(tmp_path):
    """dynamo runs the user's forward without Python frames: the nearest user frame is the last of the
    "from user code:" lines in its message, not a torch frame, not a graphtool one."""
    from graphtool.capture.user.boundary import exception_chain, graphtool_frame, nearest_user_frame

    model = str(tmp_path / "model.py")
    inner = ValueError(f'boom\n\nfrom user code:\n   File "{model}", line 7, in forward\n    return self.block(x)\n'
                       f'  File "{model}", line 12, in forward\n    return x.item()')
    try:
        try:
            raise inner
        except ValueError as e:
            raise RuntimeError("backend raised") from e
    except RuntimeError as outer:
        assert exception_chain(outer) == [outer, inner]
        assert nearest_user_frame(outer) == (model, 12)
        assert graphtool_frame(outer) is None  # raised by this test file: not graphtool's own code


def test_a_loop_step_that_reads_a_value_on_the_stand_in_says_it_is_the_stand_ins_limit():
    """A later step run eagerly (``--stance eager_on_recompile``, a graph break) that reads a tensor's value fails
    on the meta stand-in only: the loop's failure says so instead of reading as the user's bug."""
    from graphtool.capture.steady_state import _failure

    said = _failure(2, RuntimeError("Tensor.item() cannot be called on meta tensors"))
    assert said.startswith("step 2 raised: RuntimeError: Tensor.item() cannot be called on meta tensors")
    assert "the meta stand-in has shapes but no values" in said
    assert "stand-in" not in _failure(3, ValueError("this model runs once"))
