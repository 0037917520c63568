"""graphtool on model objects: the commands as functions of a model and its example inputs.

Each function takes what ``model(*args, **kwargs)`` takes, plus the CLI's options as keyword
arguments (``backend=``, ``inference=``, ``device=``...), and returns a :class:`Result`: the report
the CLI renders, with ``summary()``, ``to_dict()`` (the JSON the CLI prints), the report's own fields
(``verdict.eligible``, ``verdict.reasons``, ``report.graph_breaks``, ``report.mutated_inputs``) and
``_repr_html_`` for notebooks. A model keyword argument that clashes with an option goes in
``model_kwargs={...}``.

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
import io
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

__all__ = ["Result", "cudagraphs", "devices", "lint", "memory", "mutations", "render", "report", "trace"]


@dataclass(frozen=True)
class Result:
    """One report about one model. Attributes the wrapper does not have come from the report
    (``result.eligible`` is ``result.report.eligible``)."""

    kind: str  # trace | mutations | devices | cudagraphs | memory | lint | report
    report: Any  # the analysis dataclass the CLI renders (TraceReport, Verdict, LintReport...)
    header: Optional[dict] = None  # the ``model`` object of the CLI's JSON, for the commands that print one
    found: bool = False  # what --check exits 1 on
    extra: dict = field(default_factory=dict)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") or name in ("kind", "report", "header", "found", "extra"):
            raise AttributeError(name)
        return getattr(self.report, name)

    # -- fields to assert on -------------------------------------------------------------------
    @property
    def graph_breaks(self) -> list:
        """Graph breaks (trace: ``BreakInfo``; lint: the counted ``Break`` s), each with ``file``, ``line``, ``reason``."""
        if self.kind == "lint":
            return [b for m in self.report.models for b in m.counted_breaks]
        if self.kind in ("trace", "report"):
            return list(self._trace.breaks)
        raise AttributeError(f"a {self.kind} report has no graph_breaks (graphtool.trace or graphtool.lint have)")

    @property
    def mutated_inputs(self) -> list:
        """Inputs the model mutates (``InputMutation``: ``name``, ``kind``, ``source``)."""
        if self.kind == "mutations":
            return list(self.report.mutated)
        if self.kind in ("trace", "report"):
            return list(self._trace.mutations.mutated)
        raise AttributeError(f"a {self.kind} report has no mutated_inputs (graphtool.mutations has)")

    @property
    def _trace(self):
        return self.report.trace if self.kind == "report" else self.report

    # -- renderings ----------------------------------------------------------------------------
    def summary(self) -> str:
        """The one line the CLI ends with."""
        r = self.report
        if self.kind == "trace":
            return r.summary() + (f"; {self.extra['verdict'].summary()}" if self.extra.get("verdict") else "")
        if self.kind in ("mutations", "devices", "memory"):
            return r.verdict()
        if self.kind in ("cudagraphs", "report"):
            return r.summary()
        if self.kind == "lint":
            from graphtool.text import count

            m = r.models[0]
            parts = [count(len(m.counted_breaks), "graph break"), count(len(m.recompiles), "recompile"),
                     count(len(m.skipped_frames), "skipped frame")]
            return f"lint {'passed' if r.passed else 'failed'}: " + ", ".join(parts)
        return str(r)

    def to_dict(self) -> dict:
        """The JSON document the CLI prints for this command (``--format json``)."""
        if self.kind == "trace":
            data = self.report.to_dict()
            if self.extra.get("verdict") is not None:
                data["cudagraphs"] = self.extra["verdict"].to_dict()
            if self.extra.get("bench") is not None:
                data["bench"] = self.extra["bench"].to_dict()
            return data
        if self.kind == "lint":
            return self.report.to_dict()
        if self.kind == "report":
            return self.report.trace.to_dict()
        body = self.report.to_dict()
        key = {"devices": "devices", "cudagraphs": "cudagraphs", "memory": "memory"}.get(self.kind)
        return {"model": self.header, **(body if key is None else {key: body})}

    def text(self, width: int = 100) -> str:
        """What the CLI prints in a terminal for this report, as plain text (diagnostics included)."""
        return _plain(self._view(), width)

    def diagnostics(self) -> str:
        """The findings alone, as the CLI prints them (ruff-style: ``file:line:col: CODE message``, the
        source line, ``help:`` and torch's link), one per line, nothing wrapped."""
        from graphtool.render.diagnostics import format_diagnostics

        r = self.report
        if self.kind == "lint":
            from graphtool.render.lint import lint_diagnostics

            return format_diagnostics(lint_diagnostics(r))
        if self.kind == "trace":
            return format_diagnostics(r.diagnostics())
        if self.kind == "mutations":
            from graphtool.analysis.diagnostics import mutation_diagnostics, python_allow
            from graphtool.analysis.mutations import is_allowed

            accepted = {m.name for m in r.mutated if is_allowed(m, self.extra.get("allow", ()))}
            return format_diagnostics(mutation_diagnostics(r, skip=accepted, model=None, accept=python_allow))
        if self.kind == "cudagraphs":
            from rich.console import Group

            from graphtool.render.cudagraphs import diagnostic

            return _plain(Group(*[diagnostic(x) for x in r.reasons if x.skips]), 0)
        return self.text(0)

    def _view(self):
        r = self.report
        if self.kind == "trace":
            from graphtool.render.trace import trace_view

            verdict = self.extra.get("verdict")
            return trace_view(r, verdict.summary() if verdict is not None else None)
        if self.kind == "mutations":
            from graphtool.analysis.diagnostics import python_allow
            from graphtool.render.mutations import mutations_view

            return mutations_view(r, allowed=self.extra.get("allow", ()), accept=python_allow)
        if self.kind == "devices":
            from graphtool.render.devices import devices_view

            return devices_view(r)
        if self.kind == "cudagraphs":
            from graphtool.render.cudagraphs import cudagraphs_view

            return cudagraphs_view(r, self.header.get("stopped") if self.header else None)
        if self.kind == "memory":
            from graphtool.render.memory import memory_view

            return memory_view(r)
        if self.kind == "lint":
            from graphtool.render.lint import lint_view

            return lint_view(r)
        return self.summary()

    def html(self) -> str:
        """A whole self-contained HTML page: the report page for ``graphtool.report``, else the page's
        view of this one report (nothing is fetched when it is opened)."""
        if self.kind == "report":
            return self.extra["page"]
        from graphtool.render.report import format_view

        title = self.extra.get("title", "model")
        return format_view(self.kind, self.report, title=title, summary=self.summary(), text=self._findings())

    def _findings(self) -> str:
        """The diagnostics the view lists under Findings (the memory view has none: its tables say it all)."""
        return "" if self.kind == "memory" else self.diagnostics()

    def save(self, path) -> Path:
        """Write :meth:`html` to ``path`` (whole or not at all)."""
        from graphtool.render.documents import write_atomic

        path = Path(path)
        write_atomic(path, self.html())
        return path

    def _repr_html_(self) -> str:
        from graphtool.render.report import inline_frame

        page = self.html()
        if self.kind == "report":
            return inline_frame(page, height=800)
        # a sandboxed frame cannot size itself: room for the header, each table row and each line of findings
        height = 200 + 60 * page.count("<tr>") + 20 * self._findings().count("\n") + 60 * page.count("<section")
        return inline_frame(page, height=min(height, 900))

    def _repr_mimebundle_(self, include=None, exclude=None) -> dict:
        return {"text/plain": self.text(), "text/html": self._repr_html_()}

    def __repr__(self) -> str:
        return f"<graphtool {self.kind}: {self.summary()}>"


def _plain(renderable, width: int) -> str:
    """What a pipe gets (``width`` 0: nothing wrapped), without styles."""
    from rich.console import Console

    from graphtool.render.theme import THEME

    console = Console(file=io.StringIO(), width=width or 10_000, theme=THEME, color_system=None, force_terminal=False, force_jupyter=False,
                      record=True, soft_wrap=True)
    console.print(renderable)
    return "\n".join(line.rstrip() for line in console.export_text().splitlines()) + "\n"


@contextlib.contextmanager
def _model(model, args, kwargs, model_kwargs):
    """The caller's model as a command target, put back as it was when the command is done."""
    from graphtool.capture import compat

    compat.import_torch()
    from graphtool.capture.model_object import ModelObject

    with ModelObject(model, tuple(args), {**kwargs, **(model_kwargs or {})}) as obj:
        yield obj


def _title(obj) -> str:
    return obj.spec.entry


def _one(results):
    (r,) = results
    return r


def trace(model, *args, backend: str = "inductor", inference: bool = False, device: Optional[str] = None,
          cudagraphs: Optional[str] = None, bench: bool = False, graph_code: bool = False, debug: bool = False,
          model_kwargs: Optional[dict] = None, **kwargs) -> Result:
    """Every compiled region's forward and backward graphs (``graphtool trace``); ``cudagraphs=BACKEND``
    adds the CUDA-graph verdict, ``bench`` eager against torch.compile timings (``result.extra["bench"]``),
    ``graph_code`` each graph's readable source (``result.extra["graph_code"]``).

    >>> import torch, graphtool
    >>> r = graphtool.trace(torch.nn.Linear(4, 2), torch.randn(3, 4))
    >>> r.summary(), r.graph_breaks
    ('1 compiled region, 0 graph breaks, 0 skipped frames, 0 inputs mutated', [])
    """
    from graphtool.commands.trace import trace as run

    with _model(model, args, kwargs, model_kwargs) as obj:
        res = _one(run(obj, device=device, inference=inference, backend=backend, cudagraphs=cudagraphs, bench=bench,
                       graph_code=graph_code, debug=debug))
    return Result("trace", res.report, extra={"verdict": res.verdict, "bench": res.bench, "graph_code": res.graph_code,
                                              "title": _title(obj)})


def mutations(model, *args, backend: str = "inductor", inference: bool = False, device: Optional[str] = None,
              allow: Sequence[str] = (), debug: bool = False, model_kwargs: Optional[dict] = None, **kwargs) -> Result:
    """Which inputs the model mutates and which outputs alias inputs (``graphtool mutations``);
    ``found`` when one is that ``allow`` (``buffers``, ``parameters``, ``user_inputs``, FQN patterns) does not accept."""
    from graphtool.commands.mutations import mutations as run

    with _model(model, args, kwargs, model_kwargs) as obj:
        res = _one(run(obj, device=device, inference=inference, backend=backend, allow=tuple(allow), debug=debug))
    return Result("mutations", res.report, res.header, res.found, extra={"allow": tuple(allow), "title": _title(obj)})


def devices(model, *args, backend: str = "inductor", inference: bool = False, device: Optional[str] = None,
            debug: bool = False, model_kwargs: Optional[dict] = None, **kwargs) -> Result:
    """Which device every node would run on, on a GPU (a meta copy of the model stands for one)."""
    from graphtool.commands.devices import devices as run

    with _model(model, args, kwargs, model_kwargs) as obj:
        res = _one(run(obj, device=device, inference=inference, backend=backend, debug=debug))
    return Result("devices", res.report, res.header, res.found, extra={"title": _title(obj)})


def cudagraphs(model, *args, backend: str = "inductor", inference: bool = False, device: Optional[str] = None,
               dynamic: bool = False, settings: Sequence[str] = (), debug: bool = False,
               model_kwargs: Optional[dict] = None, **kwargs) -> Result:
    """Would CUDA graphs be applied, and if not, why (``graphtool cudagraphs``): ``.eligible``, ``.reasons``.
    ``backend`` is ``inductor`` (``mode="reduce-overhead"``) or ``cudagraphs``; ``settings`` as ``--set``."""
    from graphtool.commands.cudagraphs import cudagraphs as run

    with _model(model, args, kwargs, model_kwargs) as obj:
        res = _one(run(obj, device=device, inference=inference, backend=backend, dynamic=dynamic, settings=settings,
                       debug=debug))
    return Result("cudagraphs", res.report, res.header, res.found, extra={"title": _title(obj)})


def memory(model, *args, backend: str = "inductor", device: Optional[str] = None, by: str = "line",
           depth: Optional[int] = None, top: int = 10, dynamic: bool = False, debug: bool = False,
           model_kwargs: Optional[dict] = None, **kwargs) -> Result:
    """What training keeps for backward, eager beside compiled (``graphtool memory``)."""
    from graphtool.commands.memory import memory as run

    with _model(model, args, kwargs, model_kwargs) as obj:
        res = _one(run(obj, device=device, backend=backend, by=by, depth=depth, top=top, dynamic=dynamic, debug=debug))
    return Result("memory", res.report, res.header, res.found, extra={"title": _title(obj)})


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
    from graphtool.analysis.lint import Budget, LintReport, LintTarget
    from graphtool.capture.lint_worker import lint_spec
    from graphtool.commands import baseline as baselines
    from graphtool.commands.lint import _check_numbers

    _check_numbers(max_graph_breaks=max_graph_breaks, max_recompiles=max_recompiles, max_skipped_frames=max_skipped_frames)
    baseline = baselines.accepted(baseline)
    with _model(model, args, kwargs, model_kwargs) as obj:
        spec = obj.load()
        calls = None if steps is None else [tuple(s) if isinstance(s, (tuple, list)) else (s,) for s in steps]
        result = lint_spec(spec, calls=calls, dynamic=dynamic, debug=debug)
    budget = Budget(max_graph_breaks=max_graph_breaks, max_recompiles=max_recompiles,
                    max_skipped_frames=max_skipped_frames, allowed_breaks=tuple(allowed_breaks))
    target = LintTarget(path=name or str(spec.path), entry=None if name else spec.entry, dynamic=dynamic, budget=budget)
    judged = baselines.judge(target, result, baseline)
    return Result("lint", LintReport((judged,), None), found=not judged.passed, extra={"title": _title(obj)})


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


def report(model, *args, output=None, backend: str = "inductor", inference: bool = False, device: Optional[str] = None,
           memory: bool = True, layout_timeout: float = 30.0, debug: bool = False,
           model_kwargs: Optional[dict] = None, **kwargs) -> Result:
    """Every fact about the model in one self-contained HTML page (``graphtool report``): shown inline in a
    notebook, ``result.html()`` is the page, ``output=`` also writes it."""
    import torch

    from graphtool import __version__
    from graphtool.commands.report import report as run
    from graphtool.render.report import format_report, python_version

    with _model(model, args, kwargs, model_kwargs) as obj:
        res = _one(run(obj, device=device, inference=inference, backend=backend, memory=memory,
                       layout_timeout=layout_timeout, debug=debug))
    versions = {"graphtool": __version__, "torch": str(torch.__version__), "python": python_version()}
    page = format_report(res, command=f"graphtool.report({obj.spec.entry}, ...)", versions=versions)
    result = Result("report", res, found=bool(res.findings), extra={"page": page, "title": _title(obj)})
    if output is not None:
        result.save(output)
    return result
