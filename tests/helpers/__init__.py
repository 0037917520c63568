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
    from graphtool.capture.script import load_model
    from graphtool.capture.tracer import trace_model

    return trace_model(load_model(example(name)), inference=inference, backend=backend)


@functools.cache
def standin_traced(name: str, backend: str = "inductor"):
    """The accelerator stand-in trace of ``examples/NAME`` for ``backend``, once per test process."""
    from graphtool.capture.meta_standin import to_meta
    from graphtool.capture.script import load_model
    from graphtool.capture.tracer import trace_model

    spec = to_meta(load_model(example(name)))
    return trace_model(spec, backend=backend, standin=True)
