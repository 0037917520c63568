"""Capture coverage beside the break count, each figure torch's own (pytorch#191357 records the first two):

- ``calls_captured``: dynamo's ``counters["stats"]["calls_captured"]`` for one compiled call (the FX nodes whose op
  is a call that dynamo put into graphs);
- ``fallbacks_to_eager``: ``counters["frames"]`` total minus ok (frames dynamo gave up on);
- op coverage: of the torch calls an eager run of the model makes that produce a tensor, counted with a
  ``TorchFunctionMode``, how many run inside compiled graphs. The compiled run is not watched by a mode (dynamo
  traces an active mode and compiles other graphs under it): its backend hands dynamo a wrapper that runs each
  graph under the same counting mode, so only what runs inside graphs is counted. Calls that make no tensor
  (``x.size()``, ``x.dim()``, ``x.item()``, reading ``x.shape``) are left out on both sides: dynamo folds the
  metadata ones into constants, and none is an op a graph could hold.

Each is measured with nested graph breaks off and on where the installed torch has
``torch._dynamo.config.nested_graph_breaks`` (2.13 and 2.15 do; off by default, becoming the default:
pytorch#186100), which raises the break count while capturing more. Every compiled frame is forgotten before and
after (``dynamo_reset``), so the caller's own compiles are neither reused nor disturbed.

Example::

    >>> import torch
    >>> counts = measure_coverage(torch.nn.Linear(2, 2), (torch.ones(1, 2),))
    >>> counts.torch_calls, [(s.nested_graph_breaks, s.in_graphs, s.calls_captured) for s in counts.settings]
    (1, [(False, 1, 1), (True, 1, 1)])
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable
from dataclasses import dataclass

from graphtool.capture import compat

NESTED = "nested_graph_breaks"


@dataclass(frozen=True)
class SettingCounts:
    """One compiled call under one setting of nested graph breaks (None: this torch has no such setting)."""

    nested_graph_breaks: bool | None
    calls_captured: int
    fallbacks_to_eager: int
    graphs: int  # dynamo's unique_graphs
    graph_breaks: int  # sum of counters["graph_break"]
    in_graphs: int  # the tensor-making torch calls that ran inside compiled graphs


@dataclass(frozen=True)
class CoverageCounts:
    """An eager run's tensor-making torch calls, and each setting's compiled call."""

    torch_calls: int
    settings: tuple[SettingCounts, ...]
    default_nested: bool | None  # this torch's own nested_graph_breaks (None: it has no such setting)


def _counting_mode():
    import torch
    from torch.overrides import TorchFunctionMode

    class TensorCalls(TorchFunctionMode):
        """Counts the torch calls that return a tensor (or a tuple or list holding one)."""

        def __init__(self):
            super().__init__()
            self.calls = 0

        def __torch_function__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            if isinstance(out, torch.Tensor) or (isinstance(out, (tuple, list)) and any(isinstance(o, torch.Tensor) for o in out)):
                self.calls += 1
            return out

    return TensorCalls()


def count_torch_calls(fn: Callable, args: tuple = (), kwargs: dict | None = None) -> int:
    """The tensor-making torch calls one eager call of ``fn`` makes (what a ``TorchFunctionMode`` sees)."""
    mode = _counting_mode()
    with mode:
        fn(*args, **(kwargs or {}))
    return mode.calls


def _graph_counter(total: list):
    """A backend that runs each graph dynamo compiles as is (no AOT, no code generation), counting the
    tensor-making torch calls it makes each time it runs into ``total[0]``."""

    def backend(gm, example_inputs):
        forward = gm.forward

        def run(*a):
            mode = _counting_mode()
            with mode:
                out = forward(*a)
            total[0] += mode.calls
            return out

        return run

    return backend


def compiled_call(fn: Callable, args: tuple = (), kwargs: dict | None = None, nested: bool | None = None) -> SettingCounts:
    """One call of ``torch.compile(fn)`` from a clean start, under ``nested_graph_breaks=nested`` (None: as the
    installed torch has it): dynamo's counters for it, and the tensor-making torch calls run inside its graphs."""
    import torch

    total = [0]
    patch = compat.dynamo_config_patch({NESTED: nested}) if nested is not None else contextlib.nullcontext()
    compat.dynamo_reset()
    try:
        with patch:
            before = compat.capture_counters()
            torch.compile(fn, backend=_graph_counter(total))(*args, **(kwargs or {}))
            got = compat.counters_since(before)
    finally:
        compat.dynamo_reset()
    return SettingCounts(nested, got["calls_captured"], got["fallbacks_to_eager"], got["unique_graphs"], got["graph_breaks"],
                         total[0])


def measure_coverage(fn: Callable, args: tuple = (), kwargs: dict | None = None) -> CoverageCounts:
    """The eager run's tensor-making torch calls and one compiled call per setting of nested graph breaks (off,
    then on, where the installed torch has the setting). What the model prints goes to stderr."""
    has = compat.has_dynamo_flag(NESTED)
    with contextlib.redirect_stdout(sys.stderr):
        calls = count_torch_calls(fn, args, kwargs)
        settings = tuple(compiled_call(fn, args, kwargs, nested) for nested in ((False, True) if has else (None,)))
    return CoverageCounts(calls, settings, bool(compat.dynamo_flag(NESTED)) if has else None)
