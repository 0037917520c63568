"""Assertions for a project's own test suite: graph breaks, recompiles, CUDA graphs, input mutations.

Each traces the model as :mod:`graphtool.api` does (the model is left as it was) and raises
``AssertionError`` when the model is not as asked; the message is what ``graphtool`` prints in a
terminal for the same finding: the ruff-style diagnostic with the user's file and line, the source
line, the reason, torch's ``gbNNNN`` link and a ``help:`` line, so a red test says what to fix.

    >>> import torch
    >>> from graphtool.testing import assert_no_graph_breaks
    >>> assert_no_graph_breaks(torch.nn.Linear(4, 2), torch.randn(3, 4)).summary()
    'lint passed: 0 graph breaks, 0 recompiles, 0 skipped frames'
    >>> class Chatty(torch.nn.Module):
    ...     def forward(self, x):
    ...         print("hi")
    ...         return x + 1
    >>> assert_no_graph_breaks(Chatty(), torch.randn(2))  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    AssertionError: Chatty has 1 graph break (expected none):
    ...GT-B001 graph break: ...
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

__all__ = ["assert_cudagraphable", "assert_fits", "assert_graph_breaks_at_most", "assert_no_graph_breaks",
           "assert_no_input_mutations", "assert_no_recompiles"]

__tracebackhide__ = True  # pytest shows the caller's line, not these helpers'


def _name(model: Any) -> str:
    return getattr(model, "__qualname__", None) or type(model).__name__


def _ask(command: str, model, *args, **kwargs) -> Any:
    """``graphtool.COMMAND(model, *args, ...)``: the keyword arguments graphtool takes for ``command`` are its options,
    the others the model's own (``model_kwargs``)."""
    __tracebackhide__ = True
    from graphtool import api
    from graphtool.commands.options import COMMANDS, LOAD

    known = {o.name for o in COMMANDS[command].keywords} | {o.name for o in LOAD}
    options = {k: v for k, v in kwargs.items() if k in known}
    model_kwargs = {**{k: v for k, v in kwargs.items() if k not in known}, **(options.pop("model_kwargs", None) or {})}
    return getattr(api, command)(model, *args, **options, **({"model_kwargs": model_kwargs} if model_kwargs else {}))


def _fail(headline: str, result) -> None:
    __tracebackhide__ = True
    raise AssertionError(f"{headline}:\n{result.diagnostics().rstrip()}")


def assert_graph_breaks_at_most(n: int, model, *args, **kwargs) -> Any:
    """At most ``n`` graph breaks (distinct sites, as ``graphtool lint`` counts them) when the model runs on ``args``.

    Keyword arguments go to the model, except :func:`graphtool.api.lint`'s options (``allowed_breaks``,
    ``max_recompiles``...). Returns the lint :class:`~graphtool.api.Result`."""
    __tracebackhide__ = True
    from graphtool.text import count

    result = _ask("lint", model, *args, max_graph_breaks=n, **kwargs)
    if not result.passed:
        found = len(result.graph_breaks)
        expected = "expected none" if n == 0 else f"expected at most {n}"
        if result.report.models[0].no_graph:
            _fail(f"{_name(model)}: torch.compile captured no graph", result)
        _fail(f"{_name(model)} has {count(found, 'graph break')} ({expected})", result)
    return result


def assert_no_graph_breaks(model, *args, **kwargs) -> Any:
    """torch.compile captures the whole forward in one graph: no graph break, no skipped frame."""
    __tracebackhide__ = True
    return assert_graph_breaks_at_most(0, model, *args, max_skipped_frames=kwargs.pop("max_skipped_frames", 0), **kwargs)


def assert_no_recompiles(model, inputs_per_step: Sequence, **kwargs) -> Any:
    """Running the compiled model on each entry of ``inputs_per_step`` (a tuple of positional
    arguments, or one tensor, per step) compiles once: no recompile after the first call.

    >>> import torch
    >>> _ = assert_no_recompiles(torch.nn.Linear(4, 2), [torch.randn(3, 4), torch.randn(3, 4)])
    """
    __tracebackhide__ = True
    from graphtool.text import count

    steps = list(inputs_per_step)
    if not steps:
        raise ValueError("inputs_per_step is empty: give the inputs of at least one call")
    first = steps[0] if isinstance(steps[0], (tuple, list)) else (steps[0],)
    result = _ask("lint", model, *first, steps=steps, max_recompiles=0, **kwargs)
    if not result.passed:
        recompiles = len(result.report.models[0].recompiles)
        _fail(f"{_name(model)} recompiled {count(recompiles, 'time')} over {count(len(steps), 'step')} (expected none)", result)
    return result


def assert_cudagraphable(model, *args, backend: str = "inductor", **kwargs) -> Any:
    """CUDA graphs would be applied to every region (``mode="reduce-overhead"`` for ``backend="inductor"``,
    ``backend="cudagraphs"`` for torch's cudagraphs backend), judged on a meta stand-in: no GPU needed."""
    __tracebackhide__ = True
    result = _ask("cudagraphs", model, *args, backend=backend, **kwargs)
    if result.found:
        _fail(f"{_name(model)} would not be CUDA-graphed (backend {backend!r})", result)
    return result


def assert_no_input_mutations(model, *args, allow: Sequence[str] = (), **kwargs) -> Any:
    """No input is mutated and no output aliases an input, except what ``allow`` accepts: the kinds
    ``buffers``, ``parameters``, ``user_inputs``, or FQN patterns such as ``"*.k_cache"``."""
    __tracebackhide__ = True
    result = _ask("mutations", model, *args, allow=allow, **kwargs)
    if result.found:
        _fail(f"{_name(model)}: {result.summary()}", result)
    return result


def assert_fits(model, *args, device_memory: str, **kwargs) -> Any:
    """The training step's predicted peak (``graphtool memory --fit``: parameters, gradients, the optimizer state of
    the script's or the step's optimizer, saved activations and the largest transient, compiled) fits
    ``device_memory``: a size (``"24GiB"``, ``"80GB"``) or a GPU name (``"H100"``), a budget a test can hold a
    model to. Keyword arguments go to :func:`graphtool.api.memory` when they are its options (``budgets=``...),
    else to the model. Returns the memory :class:`~graphtool.api.Result`.

    >>> import torch
    >>> net = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.GELU(), torch.nn.Linear(256, 64))
    >>> assert_fits(net, torch.randn(32, 64), device_memory="256KiB")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    AssertionError: Sequential does not fit 256.0 KiB: over by ...
    """
    __tracebackhide__ = True
    result = _ask("memory", model, *args, fit=device_memory, **kwargs)
    fit = result.fit
    if fit.verdict.startswith("does not fit"):
        from graphtool.analysis.memory.saved import format_bytes

        biggest = "; ".join(f"{c.what} {format_bytes(c.bytes)}" + (f" at {c.source}" if c.source and not c.source.startswith("(") else "")
                            for c in fit.contributors[:3])
        raise AssertionError(f"{_name(model)} {fit.verdict}" + (f"; biggest: {biggest}" if biggest else ""))
    return result
