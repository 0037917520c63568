"""Shared fixtures: example paths, a CLI runner that returns (exit code, stdout, stderr), cached traces."""

from __future__ import annotations

import functools
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"
FIXTURES = Path(__file__).resolve().parent / "fixtures"


def example(name: str) -> str:
    return str(EXAMPLES / name)


@pytest.fixture
def cli(capsys):
    """Run graphtool in-process: ``rc, out, err = cli("trace", path, "--format", "json")``."""
    from graphtool.cli.main import run

    def _run(*args: str):
        rc = run([str(a) for a in args])
        captured = capsys.readouterr()
        return rc, captured.out, captured.err

    return _run


@functools.cache
def traced(name: str, inference: bool = False):
    from graphtool.capture.script import load_model
    from graphtool.capture.tracer import trace_model

    return trace_model(load_model(example(name)), inference=inference)


@functools.cache
def standin_traced(name: str, backend: str = "inductor"):
    from graphtool.analysis.cudagraphs import keep_input_mutations_for
    from graphtool.capture.meta_standin import to_meta
    from graphtool.capture.script import load_model
    from graphtool.capture.tracer import trace_model

    spec = to_meta(load_model(example(name)))
    return trace_model(spec, keep_inference_input_mutations=keep_input_mutations_for(backend), standin=True)
