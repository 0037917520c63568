"""A CPU stand-in for the parts of ``torch.cuda`` that graphtool's capture and timing code calls.

CI has no GPU, yet the capture/replay logic (static input buffers, copy-in, static outputs,
what happens when capture fails) must be right. ``FakeCuda`` emulates CUDA-graph *semantics* on CPU
tensors, so that logic can be tested where it runs:

- capture records every ATen op that runs inside ``torch.cuda.graph(g)`` (forward and, because
  CPU autograd runs on the calling thread with the same dispatch modes, backward too), with the
  very tensor objects it read and wrote;
- ``g.replay()`` re-runs the recorded ops on those same tensors and writes each fresh result into
  the tensor captured as that op's output, so results appear in the capture-time buffers, as with
  a real graph (fixed addresses); Python between the ops is frozen at capture, as on a GPU;
- ops that synchronise with the host (``.item()``, ``nonzero``) raise during capture with CUDA's
  own message, as a real capture does.

It is a test double, not a GPU: it says nothing about speed, streams or memory pools.
"""

from __future__ import annotations

import contextlib

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves

_HOST_SYNC = {
    torch.ops.aten._local_scalar_dense.default,
    torch.ops.aten.nonzero.default,
}


class _Recorder(TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.ops = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func in _HOST_SYNC:
            raise RuntimeError("CUDA error: operation not permitted when stream is capturing")
        out = func(*args, **kwargs)
        self.ops.append((func, args, kwargs, out))
        return out


def _storage(t):
    return t.untyped_storage().data_ptr()


class FakeGraph:
    def __init__(self):
        self.ops = None
        self.replays = 0

    def replay(self):
        if self.ops is None:
            raise RuntimeError("replay() before capture")
        with torch.no_grad():
            for func, args, kwargs, out in self.ops:
                new = func(*args, **kwargs)
                for old, fresh in zip(tree_leaves(out), tree_leaves(new)):
                    # Views and in-place results already live in the captured buffers.
                    if isinstance(old, torch.Tensor) and _storage(old) != _storage(fresh):
                        old.copy_(fresh)
        self.replays += 1


class FakeStream:
    def wait_stream(self, other):
        pass


class FakeEvent:
    """Host-clock events: ``elapsed_time`` in milliseconds between two ``record()`` calls."""

    def __init__(self, enable_timing=False):
        self.t = None

    def record(self, stream=None):
        import time

        self.t = time.perf_counter()

    def synchronize(self):
        pass

    def elapsed_time(self, end):
        return (end.t - self.t) * 1000.0


class FakeCuda:
    """Install with ``FakeCuda().install(monkeypatch)``; counts what was called for assertions."""

    def __init__(self):
        self.graphs: list[FakeGraph] = []
        self.synchronized = 0

    def install(self, monkeypatch):
        fake = self

        @contextlib.contextmanager
        def graph(g, pool=None, stream=None):
            recorder = _Recorder()
            with recorder:
                yield
            g.ops = recorder.ops

        def make_graph():
            g = FakeGraph()
            fake.graphs.append(g)
            return g

        def synchronize(device=None):
            fake.synchronized += 1

        for name, value in {
            "CUDAGraph": make_graph,
            "graph": graph,
            "Stream": FakeStream,
            "current_stream": lambda device=None: FakeStream(),
            "stream": lambda s: contextlib.nullcontext(),
            "synchronize": synchronize,
            "Event": FakeEvent,
            "memory_reserved": lambda device=None: 1 << 20 if fake.graphs and fake.graphs[-1].ops else 0,
            "reset_peak_memory_stats": lambda device=None: None,
            "max_memory_allocated": lambda device=None: 4096,
        }.items():
            monkeypatch.setattr(torch.cuda, name, value)
        return self
