"""graphtool on model objects: the commands as functions of a model and its example inputs.

Each function takes what ``model(*args, **kwargs)`` takes, plus the CLI's options as keyword
arguments (``backend=``, ``inference=``, ``device=``...), and returns the command's own result (a
:class:`Result`, see :mod:`graphtool.commands.result`): the very object the CLI renders, with
``summary()``, ``to_dict()`` (the JSON the CLI prints), ``text()``, ``diagnostics()``, the report's own
fields (``verdict.eligible``, ``verdict.reasons``, ``report.graph_breaks``, ``report.mutated_inputs``) and
``_repr_html_`` for notebooks. Each function is a thin door over its command, as ``httpx.get`` is over
``Client``. A model keyword argument that clashes with an option goes in ``model_kwargs={...}``.

    >>> import torch, graphtool
    >>> net = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU())
    >>> graphtool.cudagraphs(net, torch.randn(2, 4)).eligible
    True
    >>> graphtool.mutations(net, torch.randn(2, 4)).summary()
    'no input is mutated and no output aliases an input'

The model is left as it was handed over (see :mod:`graphtool.capture.model_object` for what is put
back, and why ``torch._dynamo`` is reset). These functions are what the ``commands`` run on a
script: the script is loaded into a spec where an object's spec is made directly, then both go the
same way, so a script and an object give the same report.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from pathlib import Path
from typing import Optional

from graphtool.capture.stack_room import with_stack_room
from graphtool.commands.result import Result

__all__ = ["Result", "bench", "cudagraphs", "devices", "lint", "memory", "mutations", "render", "report", "shapes", "trace"]


@contextlib.contextmanager
def _model(model, args, kwargs, model_kwargs):
    """The caller's model as a command target, put back as it was when the command is done."""
    from graphtool.capture import compat

    compat.import_torch()
    from graphtool.capture.model_object import ModelObject

    with ModelObject(model, tuple(args), {**kwargs, **(model_kwargs or {})}) as obj:
        yield obj


def _one(results):
    (r,) = results
    return r


@with_stack_room
def trace(model, *args, backend: str = "inductor", inference: bool = False, device: Optional[str] = None,
          cudagraphs: Optional[str] = None, bench: bool = False, graph_code: bool = False, debug: bool = False,
          model_kwargs: Optional[dict] = None, **kwargs) -> Result:
    """Every compiled region's forward and backward graphs (``graphtool trace``); ``cudagraphs=BACKEND``
    adds the CUDA-graph verdict (``result.verdict``), ``bench`` eager against torch.compile timings
    (``result.bench``), ``graph_code`` each graph's readable source (``result.graph_code``).

    >>> import torch, graphtool
    >>> r = graphtool.trace(torch.nn.Linear(4, 2), torch.randn(3, 4))
    >>> r.summary(), r.graph_breaks
    ('1 compiled region, 0 graph breaks, 0 skipped frames, 0 inputs mutated', [])
    """
    from graphtool.commands.trace import trace as run

    with _model(model, args, kwargs, model_kwargs) as obj:
        return _one(run(obj, device=device, inference=inference, backend=backend, cudagraphs=cudagraphs, bench=bench,
                        graph_code=graph_code, debug=debug))


@with_stack_room
def mutations(model, *args, backend: str = "inductor", inference: bool = False, device: Optional[str] = None,
              allow: Sequence[str] = (), debug: bool = False, model_kwargs: Optional[dict] = None, **kwargs) -> Result:
    """Which inputs the model mutates and which outputs alias inputs (``graphtool mutations``);
    ``found`` when one is that ``allow`` (``buffers``, ``parameters``, ``user_inputs``, FQN patterns) does not accept."""
    from graphtool.commands.mutations import mutations as run

    with _model(model, args, kwargs, model_kwargs) as obj:
        return _one(run(obj, device=device, inference=inference, backend=backend, allow=tuple(allow), debug=debug))


@with_stack_room
def devices(model, *args, backend: str = "inductor", inference: bool = False, device: Optional[str] = None,
            debug: bool = False, model_kwargs: Optional[dict] = None, **kwargs) -> Result:
    """Which device every node would run on, on a GPU (a meta copy of the model stands for one)."""
    from graphtool.commands.devices import devices as run

    with _model(model, args, kwargs, model_kwargs) as obj:
        return _one(run(obj, device=device, inference=inference, backend=backend, debug=debug))


@with_stack_room
def cudagraphs(model, *args, backend: str = "inductor", inference: bool = False, device: Optional[str] = None,
               dynamic: bool = False, settings: Sequence[str] = (), debug: bool = False, schedule=None,
               model_kwargs: Optional[dict] = None, **kwargs) -> Result:
    """Would CUDA graphs be applied, and if not, why (``graphtool cudagraphs``): ``.eligible``, ``.reasons``.
    ``backend`` is ``inductor`` (``mode="reduce-overhead"``) or ``cudagraphs``; ``settings`` as ``--set``;
    ``schedule``: the model's inputs for each step of a loop (as ``graphtool.shapes`` takes them): ``.shapes`` is
    the loop's prediction (``cudagraphs --schedule``)."""
    from graphtool.commands.cudagraphs import cudagraphs as run

    with _model(model, args, kwargs, model_kwargs) as obj:
        return _one(run(obj, device=device, inference=inference, backend=backend, dynamic=dynamic, settings=settings,
                        debug=debug, schedule=False if schedule is None else schedule))


@with_stack_room
def memory(model, *args, backend: str = "inductor", device: Optional[str] = None, by: str = "line",
           depth: Optional[int] = None, top: int = 10, dynamic: bool = False, fit: Optional[str] = None,
           budgets: Optional[str] = None, debug: bool = False, model_kwargs: Optional[dict] = None, **kwargs) -> Result:
    """What training keeps for backward, eager beside compiled (``graphtool memory``). ``fit`` (``"24GiB"`` or a GPU
    name, as ``--fit``) and ``budgets`` (``"1,0.5,0.1"``, or ``""`` for the default sweep, as ``--budgets``): will the
    training step fit, eager beside compiled and at each activation-memory budget (``result.fit``).

    >>> import torch, graphtool
    >>> net = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.GELU(), torch.nn.Linear(256, 64))
    >>> r = graphtool.memory(net, torch.randn(32, 64), fit="24GiB")
    >>> r.fit.verdict.startswith("fits")
    True
    """
    from graphtool.commands.memory import memory as run

    with _model(model, args, kwargs, model_kwargs) as obj:
        return _one(run(obj, device=device, backend=backend, by=by, depth=depth, top=top, dynamic=dynamic, fit=fit,
                        budgets=budgets, debug=debug))


@with_stack_room
def shapes(model, *args, schedule=None, sizes: Sequence[str] = (), steps: Optional[int] = None, max_steps: int = 1000,
           seed: int = 0, mark_dynamic: Sequence[str] = (), maybe_mark_dynamic: Sequence[str] = (),
           dynamic: Optional[str] = None, settings: Sequence[str] = (), inference: bool = False,
           backend: str = "inductor", advise: bool = True, device: Optional[str] = None, debug: bool = False,
           model_kwargs: Optional[dict] = None, **kwargs) -> Result:
    """What ``torch.compile`` does over a loop whose input shapes change (``graphtool shapes``): the graphs it
    compiles, the CUDA graphs it records and every recompile, step by step, before the run. ``schedule`` is the
    model's inputs for each step (an iterable of argument tuples, or of tensors, as a script's
    ``get_input_schedule()`` yields them); else ``sizes`` draws them from ``args`` as ``--sizes`` does
    (``["x:0=16,32,7"]``). The other options are the CLI's.

    >>> import torch, graphtool
    >>> net = torch.nn.Linear(8, 4)
    >>> r = graphtool.shapes(net, torch.randn(16, 8), schedule=[torch.randn(n, 8) for n in (16, 16, 7)], advise=False)
    >>> r.report.graphs_compiled, r.report.recompiles
    (2, 1)
    """
    from graphtool.commands.shapes import check_options
    from graphtool.commands.shapes import shapes as run

    opts = check_options(sizes=sizes, steps=steps, max_steps=max_steps, seed=seed, mark_dynamic=mark_dynamic,
                         maybe_mark_dynamic=maybe_mark_dynamic, dynamic=dynamic, settings=settings,
                         inference=inference, backend=backend, advise=advise)
    with _model(model, args, kwargs, model_kwargs) as obj:
        return _one(run(obj, device=device, schedule=schedule, options=opts, debug=debug))


@with_stack_room
def bench(model, *args, compile_mode: str = "default", backward: Optional[bool] = None, inference: bool = False,
          warmup: int = 10, iters: int = 100, repeat: int = 3, cudagraphs: bool = False, device: Optional[str] = None,
          debug: bool = False, model_kwargs: Optional[dict] = None, **kwargs) -> Result:
    """Eager against ``torch.compile`` (and, with ``cudagraphs`` on a GPU, graphtool's own CUDA-graph replay and
    ``mode="reduce-overhead"``), each checked against eager, then timed (``graphtool bench``). The model runs where
    it is. Training by default, as every command (forward and backward when something requires grad); ``inference``
    times the forward alone.

    >>> import torch, graphtool
    >>> r = graphtool.bench(torch.nn.Linear(8, 4), torch.randn(2, 8), iters=5, repeat=1, warmup=1)
    >>> [m.name for m in r.report.modes]
    ['eager', 'compile[default]']
    """
    from graphtool.commands.bench import bench as run

    with _model(model, args, kwargs, model_kwargs) as obj:
        return run(obj, cudagraphs=cudagraphs, compile_mode=compile_mode, backward=backward, inference=inference, warmup=warmup,
                   iters=iters, repeat=repeat, device=device, debug=debug)


@with_stack_room
def lint(model, *args, steps: Optional[Sequence] = None, max_graph_breaks: Optional[int] = None,
         max_recompiles: Optional[int] = None, max_skipped_frames: Optional[int] = None,
         allowed_breaks: Sequence[str] = (), dynamic: bool = False, baseline=None,
         name: Optional[str] = None, debug: bool = False, model_kwargs: Optional[dict] = None, **kwargs) -> Result:
    """Graph breaks, recompiles and skipped frames of one model, judged against budgets (``graphtool lint``).

    The model runs once on ``args``, or once per entry of ``steps`` (each a tuple of positional
    arguments, or one tensor): recompiles are what a loop over them triggers. ``baseline`` is a
    baseline file (``graphtool lint --baseline``'s format) or its parsed content, whose entries for
    ``name`` (default: the model's source file) are accepted; the budget then counts new breaks only.
    Runs in this process, unlike the CLI's one child per script.

    >>> import torch, graphtool
    >>> graphtool.lint(torch.nn.Linear(4, 2), torch.randn(3, 4), max_graph_breaks=0).passed
    True
    """
    from graphtool.commands.lint import lint_model

    with _model(model, args, kwargs, model_kwargs) as obj:
        return lint_model(obj, steps=steps, max_graph_breaks=max_graph_breaks, max_recompiles=max_recompiles,
                          max_skipped_frames=max_skipped_frames, allowed_breaks=allowed_breaks, dynamic=dynamic,
                          baseline=baseline, name=name, debug=debug)


@with_stack_room
def render(model, *args, graph: str = "autograd", output=None, fmt: Optional[str] = None, saved: bool = False,
           region: int = 0, collapse: str = "auto", depth: Optional[int] = None, backend: str = "inductor",
           device: Optional[str] = None, debug: bool = False, model_kwargs: Optional[dict] = None, **kwargs):
    """The graph as a picture (``graphtool render``): the DOT text (``fmt="dot"``) or the SVG text
    (``fmt="svg"``, the default), or, with ``output``, the file written (its format from ``fmt`` or the
    file name) and its :class:`~pathlib.Path` returned.

    >>> import torch, graphtool
    >>> graphtool.render(torch.nn.Linear(4, 2), torch.randn(3, 4), fmt="dot").startswith("digraph")
    True
    """
    from graphtool.commands.render import check_options, drawing
    from graphtool.render.dot import to_dot

    check_options(graph, collapse, depth)
    with _model(model, args, kwargs, model_kwargs) as obj:
        picture = drawing(obj, device=device, graph=graph, saved=saved, region=region, collapse=collapse, depth=depth,
                          backend=backend, debug=debug)
    dot = to_dot(picture)
    if output is not None:
        from graphtool.render.layout import FORMATS, render_file

        output = Path(output)
        fmt = fmt or (output.suffix.lstrip(".").lower() or "svg")
        if fmt not in FORMATS:
            from graphtool.errors import UsageError

            raise UsageError(f"format {fmt!r} is not one of {', '.join(FORMATS)}")
        render_file(dot, fmt, output)
        return output
    if (fmt or "svg") == "dot":
        return dot
    if fmt not in (None, "svg"):
        from graphtool.errors import UsageError

        raise UsageError(f"fmt={fmt!r}: without output= graphtool returns 'dot' or 'svg' text; pass output= for {fmt}")
    from graphtool.render.report import layout_svg

    return layout_svg(dot)


@with_stack_room
def report(model, *args, output=None, backend: str = "inductor", inference: bool = False, device: Optional[str] = None,
           memory: bool = True, layout_timeout: float = 30.0, debug: bool = False, fit: Optional[str] = None,
           budgets: Optional[str] = None, schedule: bool = False, model_kwargs: Optional[dict] = None, **kwargs) -> Result:
    """Every fact about the model in one self-contained HTML page (``graphtool report``): shown inline in a
    notebook, ``result.html()`` is the page, ``output=`` also writes it; ``fit=``/``budgets=`` add the "Will it fit"
    section with the step's live-bytes timeline (as ``graphtool report --fit``)."""
    from dataclasses import replace

    from graphtool.commands.report import report as run

    with _model(model, args, kwargs, model_kwargs) as obj:
        res = _one(run(obj, device=device, inference=inference, backend=backend, memory=memory,
                       layout_timeout=layout_timeout, debug=debug, fit=fit, budgets=budgets, schedule=schedule))
    result = replace(res, made_by=f"graphtool.report({obj.spec.entry}, ...)")
    if output is not None:
        result.save(output)
    return result
