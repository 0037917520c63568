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
  own message, as a real capture does, and invalidate it;
- the state a capture changes is kept as torch keeps it (aten/src/ATen/cuda/CUDAGraph.cpp): the
  current stream (``torch.cuda.stream`` contexts), whether a capture is under way, the caching
  allocator's pools that captures allocate into, and the default CUDA generator's capture mode
  (``capture_begin`` sets it through ``capture_prologue``; only a ``capture_end`` that succeeds clears it
  through ``capture_epilogue``: on torch 2.11 an H200 showed every random op after a failed capture
  raising "Offset increment outside graph capture encountered unexpectedly"). ``capture_end()`` on an invalidated capture ends the
  capture and raises *before* it ends allocation to the pool, as torch's does; ``torch.cuda.graph`` is
  torch's own class, so its ``__exit__`` (capture_end, then the stream context) behaves as on a GPU.
  :meth:`FakeCuda.leftovers` lists whatever a capture left behind.

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
        self.invalidated = False

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func in _HOST_SYNC:
            self.invalidated = True
            raise RuntimeError("CUDA error: operation not permitted when stream is capturing")
        out = func(*args, **kwargs)
        self.ops.append((func, args, kwargs, out))
        return out


def _storage(t):
    return t.untyped_storage().data_ptr()


class FakeGraph:
    def __init__(self, cuda=None):
        self.ops = None
        self.replays = 0
        self._cuda = cuda
        self._recorder = None
        self._stream = None
        self._pool = None
        self._capture_ended = False

    def capture_begin(self, pool=None, capture_error_mode="global", **kwargs):
        cuda = self._cuda
        stream = cuda.current_stream()
        if stream is cuda.default_stream:
            raise RuntimeError("CUDA graphs must be captured on a non-default stream.")
        if cuda.capturing is not None:
            raise RuntimeError("CUDA error: operation not permitted when stream is capturing")
        self._stream, self._pool = stream, pool if pool is not None else ("graph", id(self))
        cuda.pools_allocating.add(self._pool)  # beginAllocateToPool comes before cudaStreamBeginCapture
        cuda.capturing = self
        self._generator_state = cuda.generator.state
        self._generator_state.capturing = True  # the default generator's capture_prologue
        self._recorder = _Recorder()
        self._recorder.__enter__()

    def capture_end(self):
        cuda = self._cuda
        if cuda.current_stream() is not self._stream:
            raise RuntimeError("Capture must end on the same stream it began on.")
        if cuda.capturing is not self:
            raise RuntimeError("CUDA error: operation not permitted when stream is not capturing")
        recorder, self._recorder = self._recorder, None
        recorder.__exit__(None, None, None)
        cuda.capturing = None  # cudaStreamEndCapture ends the capture, valid or not
        if recorder.invalidated:  # ... and fails on an invalidated one: torch's AT_CUDA_CHECK raises here,
            raise RuntimeError("CUDA error: operation failed due to a previous error during capture")  # pool kept
        cuda.pools_allocating.discard(self._pool)
        self._generator_state.capturing = False  # capture_epilogue, reached only by a capture that ended
        self.ops = recorder.ops
        self._capture_ended = True

    def reset(self):
        if self._capture_ended:  # torch's reset() releases the pool only of a capture that ended
            self._cuda.released_pools.append(self._pool)
            self._capture_ended = False
        self.ops = None

    def pool(self):
        return self._pool

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


class FakeGeneratorState:
    def __init__(self):
        self.capturing = False


class FakeGenerator:
    """The default CUDA generator's graph-safe state API (``clone_state``, ``graphsafe_set_state``):
    a cloned state starts out of capture mode, as torch's ``CUDAGeneratorState::clone`` does."""

    def __init__(self):
        self.state = FakeGeneratorState()

    def clone_state(self):
        return FakeGeneratorState()

    def graphsafe_set_state(self, state):
        self.state = state


class FakeStream:
    def wait_stream(self, other):
        pass

    def synchronize(self):
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
        self.default_stream = FakeStream()
        self.streams = [self.default_stream]  # the current stream is the last
        self.capturing: FakeGraph | None = None
        self.pools_allocating: set = set()  # pools the caching allocator routes captures' allocations to
        self.released_pools: list = []
        self._pool_ids = 0
        self.generator = FakeGenerator()
        self.cached = 0  # bytes the caching allocator holds free (released by empty_cache)

    def current_stream(self, device=None):
        return self.streams[-1]

    def leftovers(self) -> list[str]:
        """What a capture left behind: [] when the process is as it was before it."""
        left = []
        if self.capturing is not None:
            left.append("a capture is under way")
        if self.current_stream() is not self.default_stream:
            left.append("the current stream is still a capture's side stream")
        if self.pools_allocating:
            left.append(f"the allocator still routes to {len(self.pools_allocating)} capture pool(s)")
        if self.generator.state.capturing:
            left.append("the default CUDA generator is still in capture mode")
        return left

    def install(self, monkeypatch):
        fake = self

        @contextlib.contextmanager
        def stream(s):
            fake.streams.append(s)
            try:
                yield
            finally:
                fake.streams.pop()

        def make_graph(*args, **kwargs):
            g = FakeGraph(fake)
            fake.graphs.append(g)
            return g

        def synchronize(device=None):
            if fake.capturing is not None:
                fake.capturing._recorder.invalidated = True
                raise RuntimeError("CUDA error: operation not permitted when stream is capturing")
            fake.synchronized += 1

        def pool_handle():
            fake._pool_ids += 1
            return (0, fake._pool_ids)

        for name, value in {
            "CUDAGraph": make_graph,
            "Stream": lambda *a, **k: FakeStream(),
            "current_stream": fake.current_stream,
            "stream": stream,
            "synchronize": synchronize,
            "Event": FakeEvent,
            "current_device": lambda: 0,
            "graph_pool_handle": pool_handle,
            "empty_cache": lambda: setattr(fake, "cached", 0),
            "memory_reserved": lambda device=None: fake.cached + (1 << 20 if fake.graphs and fake.graphs[-1].ops else 0),
            "reset_peak_memory_stats": lambda device=None: None,
            "max_memory_allocated": lambda device=None: 4096,
            "default_generators": (fake.generator,),
        }.items():
            monkeypatch.setattr(torch.cuda, name, value)
        # torch.cuda.graph stays torch's own class: its __enter__/__exit__ run against the fakes above
        monkeypatch.setattr(torch.cuda.graph, "default_capture_stream", None)
        monkeypatch.setattr(torch._C, "_host_emptyCache", lambda: None, raising=False)
        monkeypatch.setattr(torch._C, "_cuda_endAllocateToPool", lambda device, pool: fake.pools_allocating.discard(pool),
                            raising=False)
        monkeypatch.setattr(torch._C, "_cuda_releasePool", lambda device, pool: fake.released_pools.append(pool),
                            raising=False)
        return self
