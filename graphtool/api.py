"""graphtool from Python: :func:`load` a model once and ask it every question, or ask one question of it.

``graphtool.load(model_or_script, *inputs, **options)`` is a :class:`Session` (as ``httpx.Client`` is): the model
(an object and what ``model(*inputs)`` takes, or a script's path) loaded once, under its launch (``ddp=True``,
``fsdp2=True``, ``world_size=``), with the options every command shares; one method per command, each answer kept
for the next. Each function here is a one-line use of a throwaway Session (``graphtool.trace(model, x, ddp=True)``
is ``graphtool.load(model, x, ddp=True).trace()``), its options split between the two by the one option table
(:mod:`graphtool.commands.options`, docs/options.md): an option no command takes is an error, and the model's own
keyword arguments go in ``model_kwargs={...}``. A result (:class:`Result`) is the very object the CLI renders:
``summary()``, ``to_dict()`` (the JSON ``--format json`` prints), ``text()``, ``diagnostics()``, its report's fields
(``verdict.eligible``, ``report.graph_breaks``) and ``_repr_html_`` for notebooks. A model object is left as it was
handed over (see :mod:`graphtool.capture.model_object`).

    >>> import torch, graphtool
    >>> net = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU())
    >>> graphtool.cudagraphs(net, torch.randn(2, 4)).eligible
    True
    >>> with graphtool.load(net, torch.randn(2, 4)) as s:
    ...     s.trace().summary(), s.mutations().summary()
    ('1 compiled region, 0 graph breaks, 0 skipped frames, 0 inputs mutated', 'no input is mutated and no output aliases an input')
    >>> graphtool.memory(net, torch.randn(32, 4), fit="24GiB").fit.verdict.startswith("fits")
    True
    >>> graphtool.trace(net, torch.randn(2, 4), ddpp=True)
    Traceback (most recent call last):
    ...
    graphtool.errors.UsageError: trace() got an unknown option ddpp=
"""

from __future__ import annotations

import inspect

from graphtool.commands.options import COMMANDS, LOAD, split
from graphtool.commands.result import Result
from graphtool.commands.session import Session

__all__ = ["Result", "Session", "bench", "compile", "cudagraphs", "devices", "load", "lint", "memory", "mutations",
           "render", "report", "shapes", "trace"]


def load(model=None, *inputs, **options) -> Session:
    """A :class:`Session` on ``model`` (an object and its ``inputs``, or a script's path): see the module."""
    return Session(model, *inputs, **options)


def _signature(fn, options, model_default=inspect.Parameter.empty) -> None:
    P = inspect.Parameter
    fn.__signature__ = inspect.Signature([P("model", P.POSITIONAL_OR_KEYWORD, default=model_default),
                                          P("inputs", P.VAR_POSITIONAL)]
                                         + [P(o.name, P.KEYWORD_ONLY, default=o.default) for o in options])


def _door(name: str):
    command = COMMANDS[name]

    def door(model, *inputs, **options):
        shared, own = split(name, options)
        with Session(model, *inputs, one_question=True, **shared) as session:
            answer = session.ask(name, own)
        if name == "render":  # a picture: the file written, else its text
            return answer.output if answer.output is not None else answer.text
        return answer

    own = {o.name for o in command.keywords}
    _signature(door, list(command.keywords) + [o for o in LOAD if o.name not in own])
    door.__name__ = door.__qualname__ = name
    door.__doc__ = (f"``graphtool {name}`` of ``model(*inputs)`` (or a script's path): {command.summary} "
                    f"``graphtool.load(model, *inputs, **shared).{name}(**own)`` (docs/options.md).")
    return door


_signature(load, LOAD, None)
trace, mutations, devices, cudagraphs, memory, shapes, render, bench, lint, report, compile = (
    _door(n) for n in ("trace", "mutations", "devices", "cudagraphs", "memory", "shapes", "render", "bench", "lint",
                       "report", "compile"))
