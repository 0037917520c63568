"""Where one compile's time goes, by phase, from torch's own compilation metrics (torch-free).

torch records each frame's compile in a ``CompilationMetrics`` (``torch/_dynamo/utils.py``): the
``compilation_metrics`` record of a ``TORCH_TRACE`` log (``bwd_compilation_metrics`` for a backward compiled
lazily, at its first call), ``torch._dynamo.utils.get_compilation_metrics()`` in process. Its ``*_us`` fields
are cumulative timers (``dynamo_timed(..., dynamo_compile_column_us=...)``) that nest::

    dynamo_cumulative_compile_time_us              _compile.compile_inner: the whole frame
     +-- aot_autograd_cumulative_compile_time_us   OutputGraph.call_user_compiler: the backend (AOT autograd + inductor)
          +-- inductor_cumulative_compile_time_us  compile_fx_inner, forward (and backward when compiled now)
               +-- compile_time_autotune_time_us   select_algorithm / benchmark fusion
               +-- inductor_code_gen_cumulative_compile_time_us   GraphLowering.compile_to_module
                    +-- triton_compile_time_us     async_compile: the Triton (GPU) or C++ (CPU) compile

    backward_cumulative_compile_time_us            (bwd_compilation_metrics) the lazy backward's whole compile
     +-- inductor_cumulative_compile_time_us ...   as above

:func:`phase_seconds` turns them into exclusive phases that add up to :func:`total_seconds` (each inner timer
clamped to its parent, so a timer torch ran outside its parent never counts twice):

============  ===================  =================================================================
key           title                what it is
============  ===================  =================================================================
dynamo        dynamo               bytecode tracing, guards, restarts after graph breaks
aot_autograd  AOT autograd         AOT tracing, the joint graph, the partitioner, pre-grad passes
inductor      inductor lowering    lowering the FX graph to inductor's IR, scheduling, post-grad passes
code_gen      code generation      writing the kernels' and wrapper's source
triton        C++/Triton compile   compiling the kernels (Triton on a GPU, C++ on a CPU)
autotune      autotuning           compile-time autotuning (``max_autotune``, benchmark fusion)
============  ===================  =================================================================

On a CPU the ``triton`` phase is the C++ compile and autotuning is usually zero: both differ on a GPU, dynamo
and AOT autograd do not. Run-time work torch also times (CUDA-graph recording, run-time autotuning) is in
:func:`runtime_seconds`, never in a compile's total.

How to use it (``graphtool log`` does this per record; ``graphtool compile`` can do the same with
``torch._dynamo.utils.get_compilation_metrics()`` in its child)::

    >>> m = {"dynamo_cumulative_compile_time_us": 12_000_000, "aot_autograd_cumulative_compile_time_us": 11_000_000,
    ...      "inductor_cumulative_compile_time_us": 10_000_000, "inductor_code_gen_cumulative_compile_time_us": 8_000_000,
    ...      "triton_compile_time_us": 5_000_000}
    >>> phase_seconds(m)
    {'dynamo': 1.0, 'aot_autograd': 1.0, 'inductor': 2.0, 'code_gen': 3.0, 'triton': 5.0, 'autotune': 0.0}
    >>> total_seconds(m), sum(phase_seconds(m).values())
    (12.0, 12.0)
    >>> phase_seconds({"backward_cumulative_compile_time_us": 3_000_000, "inductor_cumulative_compile_time_us": 2_500_000})
    {'dynamo': 0.0, 'aot_autograd': 0.5, 'inductor': 2.5, 'code_gen': 0.0, 'triton': 0.0, 'autotune': 0.0}

``metrics`` is a mapping (a log record's metadata) or any object with those attributes (torch's
``CompilationMetrics``). Missing fields count as zero; a record without any timer has ``total_seconds`` None.
The API is stable: :data:`PHASES`, :func:`phase_seconds`, :func:`total_seconds`, :func:`is_backward`,
:func:`runtime_seconds`, :func:`cache_counts`, :func:`add_phases`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Phase:
    key: str
    title: str
    field: str | None  # the cumulative timer whose exclusive part this phase is (None: what the whole leaves)


#: the exclusive phases of a compile, outermost first
PHASES: tuple[Phase, ...] = (
    Phase("dynamo", "dynamo", "dynamo_cumulative_compile_time_us"),
    Phase("aot_autograd", "AOT autograd", "aot_autograd_cumulative_compile_time_us"),
    Phase("inductor", "inductor lowering", "inductor_cumulative_compile_time_us"),
    Phase("code_gen", "code generation", "inductor_code_gen_cumulative_compile_time_us"),
    Phase("triton", "C++/Triton compile", "triton_compile_time_us"),
    Phase("autotune", "autotuning", "compile_time_autotune_time_us"),
)
TITLES = {p.key: p.title for p in PHASES}

_BACKWARD_TOTAL = "backward_cumulative_compile_time_us"
_RUNTIME = {"cudagraphify": "runtime_cudagraphify_time_us", "autotune": "runtime_triton_autotune_time_us"}


def _get(metrics: Any, key: str) -> Any:
    if isinstance(metrics, Mapping):
        return metrics.get(key)
    return getattr(metrics, key, None)


def _us(metrics: Any, key: str) -> int:
    v = _get(metrics, key)
    return int(v) if isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0 else 0


def is_backward(metrics: Any) -> bool:
    """A lazily compiled backward's metrics (``bwd_compilation_metrics``): ``is_forward`` False, or only a
    backward timer set."""
    if _get(metrics, "is_forward") is False:
        return True
    return bool(_us(metrics, _BACKWARD_TOTAL)) and not _us(metrics, "dynamo_cumulative_compile_time_us")


def total_seconds(metrics: Any) -> float | None:
    """The compile's whole time: the frame's (forward) or the lazy backward's; None when torch timed nothing."""
    for key in (_BACKWARD_TOTAL if is_backward(metrics) else "dynamo_cumulative_compile_time_us", "duration_us"):
        us = _us(metrics, key)
        if us:
            return us / 1e6
    seconds = _get(metrics, "entire_frame_compile_time_s")  # torch releases before the *_us columns
    return float(seconds) if isinstance(seconds, (int, float)) and seconds > 0 else None


def phase_seconds(metrics: Any) -> dict[str, float]:
    """Seconds per phase (the keys of :data:`PHASES`, in order), exclusive, adding up to :func:`total_seconds`."""
    total = round((total_seconds(metrics) or 0.0) * 1e6)
    backward = is_backward(metrics)
    aot = total if backward else min(_us(metrics, "aot_autograd_cumulative_compile_time_us"), total)
    inductor = min(_us(metrics, "inductor_cumulative_compile_time_us"), aot)
    code_gen = min(_us(metrics, "inductor_code_gen_cumulative_compile_time_us"), inductor)
    triton = min(_us(metrics, "triton_compile_time_us"), code_gen)
    # autotuning runs while lowering (select_algorithm) or scheduling (benchmark fusion, inside code generation):
    # taken from lowering first, the rest from code generation
    autotune = min(_us(metrics, "compile_time_autotune_time_us"), inductor - triton)
    lowering = inductor - code_gen
    from_lowering = min(autotune, lowering)
    out = {
        "dynamo": total - aot,
        "aot_autograd": aot - inductor,
        "inductor": lowering - from_lowering,
        "code_gen": code_gen - triton - (autotune - from_lowering),
        "triton": triton,
        "autotune": autotune,
    }
    return {k: v / 1e6 for k, v in out.items()}


def add_phases(parts: Iterable[Mapping[str, float]]) -> dict[str, float]:
    """Phase seconds summed over several compiles (every key of :data:`PHASES`, rounded to microseconds)."""
    out = dict.fromkeys((p.key for p in PHASES), 0.0)
    for part in parts:
        for k, v in part.items():
            out[k] = out.get(k, 0.0) + v
    return {k: round(v, 6) for k, v in out.items()}


def runtime_seconds(metrics: Any) -> dict[str, float]:
    """Run-time work torch timed after the compile (``compilation_metrics_runtime`` records): CUDA-graph recording
    and run-time autotuning, in seconds; never part of a compile's total."""
    return {k: _us(metrics, f) / 1e6 for k, f in _RUNTIME.items() if _us(metrics, f)}


def cache_counts(metrics: Any) -> dict[str, int]:
    """Cache hits and misses of one compile: inductor's FX graph cache and AOT autograd's cache, local and remote.

    >>> cache_counts({"inductor_fx_local_cache_hit_count": 1, "aotautograd_local_cache_miss_count": 1})
    {'fx_graph_hits': 1, 'fx_graph_misses': 0, 'aot_autograd_hits': 0, 'aot_autograd_misses': 1}
    """
    def n(*keys: str) -> int:
        return sum(_us(metrics, k) for k in keys)

    return {
        "fx_graph_hits": n("inductor_fx_local_cache_hit_count", "inductor_fx_remote_cache_hit_count"),
        "fx_graph_misses": n("inductor_fx_local_cache_miss_count", "inductor_fx_remote_cache_miss_count"),
        "aot_autograd_hits": n("aotautograd_local_cache_hit_count", "aotautograd_remote_cache_hit_count"),
        "aot_autograd_misses": n("aotautograd_local_cache_miss_count", "aotautograd_remote_cache_miss_count"),
    }
