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
def traced(name: str, inference: bool = False):
    """The own-device trace of ``examples/NAME``, once per test process."""
    from graphtool.capture.script import load_model
    from graphtool.capture.tracer import trace_model

    return trace_model(load_model(example(name)), inference=inference)


@functools.cache
def standin_traced(name: str, backend: str = "inductor"):
    """The accelerator stand-in trace of ``examples/NAME`` for ``backend``, once per test process."""
    from graphtool.analysis.cudagraphs import keep_input_mutations_for
    from graphtool.capture.meta_standin import to_meta
    from graphtool.capture.script import load_model
    from graphtool.capture.tracer import trace_model

    spec = to_meta(load_model(example(name)))
    return trace_model(spec, keep_inference_input_mutations=keep_input_mutations_for(backend), standin=True)
