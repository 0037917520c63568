"""What the tests share: where the example and fixture scripts are, and traces cached per process.

Importable (``from tests.helpers import example, traced``) rather than hidden in conftest.py.
"""

from __future__ import annotations

import functools
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
FIXTURES = ROOT / "tests" / "fixtures"


def example(name: str) -> str:
    return str(EXAMPLES / name)


@functools.cache
def traced(name: str, inference: bool = False, backend: str = "cudagraphs"):
    """The own-device trace of ``examples/NAME`` with ``backend``'s AOT stage, once per test process.

    The default, the cudagraphs backend's stage (no decompositions, AOT's default partitioner), gives
    the plainest graphs, which most fact tests are written against; tests of what inductor compiles
    ask for ``backend="inductor"``."""
    from graphtool.capture.tracer import trace_model
    from graphtool.capture.user.script import load_model

    return trace_model(load_model(example(name)), inference=inference, backend=backend)


@functools.cache
def standin_traced(name: str, backend: str = "inductor"):
    """The accelerator stand-in trace of ``examples/NAME`` for ``backend``, once per test process."""
    from graphtool.capture.standin.meta import to_meta
    from graphtool.capture.tracer import trace_model
    from graphtool.capture.user.script import load_model

    spec = to_meta(load_model(example(name)))
    return trace_model(spec, backend=backend, standin=True)


@functools.cache
def torch_skips_whole_forward(script: str) -> bool:
    """Whether this torch's dynamo gives up on the script's whole forward, compiling no graph: torch's
    own fact, asked of a real torch.compile. It changes between releases (torch 2.15 compiles around
    an nn.LSTM that 2.13 skips whole), so tests built on such a skip ask first."""
    import torch

    from graphtool.capture.user.script import load_model

    spec = load_model(script)
    graphs = []

    def counting(gm, example_inputs):
        graphs.append(gm)
        return gm.forward

    torch._dynamo.reset()
    try:
        torch.compile(spec.model, backend=counting)(*spec.args, **spec.kwargs)
    finally:
        torch._dynamo.reset()
    return not graphs


def needs_whole_forward_skip(script: str):
    """A pytest mark: skip (saying why) where this torch compiles part of ``script``'s forward."""
    import pytest
    import torch

    return pytest.mark.skipif(
        not torch_skips_whole_forward(script),
        reason=f"torch {torch.__version__} compiles part of {Path(script).name}'s forward; tests/fixtures/breaks/"
        "skipped_function.py covers a whole-forward skip on every release",
    )
