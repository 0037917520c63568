"""graphtool.capture.stack_room: a call beneath the roomy frame never maps a fresh stack chunk, whatever its depth.

CPython 3.11+ frees a 16 KiB frame-stack chunk when the frame at its base returns, so a loop whose callee lands
first in a new chunk maps and unmaps one per call: each fresh mapping shows up as a minor page fault when the
frame is written. The control below finds such a depth without the roomy frame (so the test can see the thrash);
beneath it, no depth has it. docs/speed.md, "The stack", has what this is worth on a real compile.
"""

from __future__ import annotations

import resource
import sys
import threading

import pytest

from graphtool.capture.stack_room import HAS_STACK_CHUNKS, call_with_stack_room, with_stack_room

CALLS = 2000


def _leaf(a, b):
    return a


def _loop_at(depth: int) -> int:
    """Minor page faults of CALLS calls of a leaf function made ``depth`` frames below here."""
    if depth:
        return _loop_at(depth - 1)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    for _ in range(CALLS):
        _leaf(1, 2)
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before


def _worst_depth(depths) -> int:
    return max(_loop_at(d) for d in depths)


def _in_a_fresh_thread(fn, *args):
    """``fn(*args)`` on a thread of its own: its frame stack starts empty, beneath no roomy frame (pytest's
    protocol runs each test beneath one, tests/conftest.py)."""
    out = []
    t = threading.Thread(target=lambda: out.append(fn(*args)))
    t.start()
    t.join()
    return out[0]


@pytest.mark.skipif(not HAS_STACK_CHUNKS, reason="CPython 3.10 and other interpreters keep no frame-stack chunks")
def test_no_depth_beneath_the_roomy_frame_maps_a_chunk_per_call():
    depths = range(0, 400)  # frames of _loop_at are ~100 bytes: a 16 KiB chunk boundary falls in every ~150
    thrash = _in_a_fresh_thread(_worst_depth, depths)
    assert thrash >= CALLS  # without room, some depth maps (and faults in) a fresh chunk on every call
    assert _in_a_fresh_thread(call_with_stack_room, _worst_depth, depths) < CALLS / 20


def test_the_roomy_call_is_the_call():
    assert call_with_stack_room(divmod, 7, 2) == (3, 1)
    assert call_with_stack_room(dict, a=1) == {"a": 1}
    with pytest.raises(ZeroDivisionError):
        call_with_stack_room(divmod, 1, 0)

    @with_stack_room
    def named(x, *, y=2):
        """its docstring"""
        return x * y

    assert named(3) == 6 and named(3, y=3) == 9
    assert named.__name__ == "named" and named.__doc__ == "its docstring"
    assert named.__wrapped__.__name__ == "named"


def test_the_commands_run_with_room():
    """The CLI, every question a Session is asked (each API function asks one) and lint's child enter through the
    roomy frame."""
    import inspect

    from graphtool.capture.processes import lint_worker
    from graphtool.cli import main
    from graphtool.commands.session import Session

    assert "call_with_stack_room(_run, argv)" in inspect.getsource(main.run)
    assert "call_with_stack_room(lint_one, job)" in inspect.getsource(lint_worker.main)
    assert "call_with_stack_room(run, self, **options)" in inspect.getsource(Session._asked)
    if HAS_STACK_CHUNKS:
        from graphtool.capture import stack_room

        assert stack_room._roomy.__code__.co_stacksize == stack_room.RESERVED_SLOTS
    assert sys.getrecursionlimit() >= 1000  # the depths above fit
