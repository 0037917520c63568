"""One report object per command, and every view of it: the model the CLI, the API, ``graphtool.testing``
and the pytest plugin all read.

Each command returns results that know how to be their JSON (``to_dict()``, what ``--format json``
prints), their summary line (``summary()``), their terminal view (``view()``, a rich renderable; the
result itself renders as one), their findings (``diagnostics()``), their section of the HTML page
(``sections()``), a page of their own (``html()``, ``save()``) and a notebook display
(``_repr_html_``, ``_repr_mimebundle_``), as each of rich's renderables renders itself: no front door
switches on which command made a result. The classes, each beside the command that makes it::

    Result
     +-- commands.trace.TraceResult
     +-- ModelResult
     |    +-- commands.mutations.MutationsResult
     |    +-- commands.devices.DevicesResult
     |    +-- commands.cudagraphs.CudagraphsResult
     |    +-- commands.memory.MemoryResult
     +-- commands.lint.LintOutcome
     +-- commands.report.ReportResult

Attributes a result does not have come from its report (``result.eligible`` is
``result.report.eligible``); ``result.ddp`` and ``result.fsdp2`` are what the wrapper of its launch did
(:class:`~graphtool.commands.launch.Part`, in ``result.wrapped``), or None.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Optional

if TYPE_CHECKING:
    from graphtool.analysis.memory.fit_report import FitReport
    from graphtool.analysis.memory.rank_memory import RankMemory
    from graphtool.analysis.shapes import ShapeReport
    from graphtool.commands.launch import Part

#: the names of the wrappers' reports (``result.ddp``...): what the launch's Part holds, under its key
WRAPPERS = ("ddp", "fsdp2")


class Result:
    """The views every command's result shares; a subclass says what it is (``to_dict``, ``summary``,
    ``view``, ``sections``) and the rest follows from that."""

    #: the command's name, for ``repr``
    command = "graphtool"

    # -- what each command's result says ---------------------------------------------------------
    def to_dict(self) -> dict:
        """The JSON document the CLI prints for this model (``--format json``)."""
        raise NotImplementedError

    def summary(self) -> str:
        """The one line that sums the report up."""
        raise NotImplementedError

    def view(self):
        """What the CLI prints in a terminal: a rich renderable."""
        raise NotImplementedError

    def sections(self) -> list[str]:
        """This report's sections of the HTML page (``graphtool report``'s own)."""
        return []

    @property
    def title(self) -> str:
        """What the model is called on a page of its own."""
        return "model"

    def diagnostics(self) -> str:
        """The findings alone, as the CLI prints them (ruff-style: ``file:line:col: CODE message``, the
        source line, ``help:`` and torch's link), one per line, nothing wrapped."""
        return self.text(0)

    def _findings(self) -> str:
        """What a page of this report lists under Findings: its diagnostics."""
        return self.diagnostics()

    # -- the views that follow ------------------------------------------------------------------
    def __rich_console__(self, console, options):
        yield self.view()

    def text(self, width: int = 100) -> str:
        """What the CLI prints in a terminal for this report, as plain text (diagnostics included)."""
        from graphtool.render.plain import format_plain

        return format_plain(self.view(), width)

    def html(self) -> str:
        """A whole self-contained HTML page: the report page's view of this one report (nothing is
        fetched when it is opened)."""
        from graphtool.render.report import format_view

        return format_view(self.sections(), title=self.title, summary=self.summary(), text=self._findings())

    def save(self, path) -> Path:
        """Write :meth:`html` to ``path`` (whole or not at all)."""
        from graphtool.render.documents import write_atomic

        path = Path(path)
        write_atomic(path, self.html())
        return path

    def _repr_html_(self) -> str:
        from graphtool.render.report import inline_frame

        page = self.html()
        # a sandboxed frame cannot size itself: room for the header, each table row and each line of findings
        height = 200 + 60 * page.count("<tr>") + 20 * self._findings().count("\n") + 60 * page.count("<section")
        return inline_frame(page, height=min(height, 900))

    def _repr_mimebundle_(self, include=None, exclude=None) -> dict:
        return {"text/plain": self.text(), "text/html": self._repr_html_()}

    def __repr__(self) -> str:
        return f"<graphtool {self.command}: {self.summary()}>"

    def __getattr__(self, name: str) -> Any:
        # only names the object lacks come here; ``report`` itself missing (a half-built copy) is no fall-through
        if name.startswith("_") or name in ("report", "wrapped"):
            raise AttributeError(name)
        if name in WRAPPERS:  # the wrapper's report, under the key its part names
            part = getattr(self, "wrapped", None)
            return part.report if part is not None and part.key == name else None
        return getattr(self.report, name)

    def _wrapped(self, method: str, *args) -> list:
        """What the launch's wrapper part (``wrapped``) gives for ``method`` (its ``view``, ``section``...), or nothing."""
        part = getattr(self, "wrapped", None)
        return [getattr(part, method)(*args)] if part is not None else []


def model_header(capture) -> dict:
    """The ``model`` object every report starts with."""
    return {
        "path": str(capture.spec.path),
        "backend": capture.backend,
        "entry": capture.spec.entry,
        "device": capture.device,
        "training": capture.module_training,  # the model's own flag; whether a backward ran is in the graphs
        "grad_enabled": capture.grad_enabled,
        "stopped": capture.stopped,
        "regions_compiled": capture.regions_compiled if capture.regions_compiled is not None else len(capture.regions),
        "regions_judged": capture.regions_judged,
        "no_graph": capture.no_graph,
    }


@dataclass(frozen=True, repr=False)
class ModelResult(Result):
    """One model's report from mutations, devices, cudagraphs, memory or shapes, with its header (the document's
    ``model``) and whether it found anything (what ``--check`` exits 1 on). Each command's subclass says how its report
    reads: ``key``, its key in the document ("devices", "cudagraphs"; "" merges it in), :meth:`summary`, :meth:`body`
    (the terminal view) and :meth:`sections`."""

    key: ClassVar[str] = ""

    header: dict
    report: Any  # the command's report: MutationReport, DeviceReport, Verdict, MemoryReport, ShapeReport
    found: bool
    stopped: Optional[str] = None
    wrapped: Optional[Part] = None  # what DDP or FSDP2 did (``cudagraphs --ddp``, ``memory --fsdp2``)
    rank: Optional[RankMemory] = None  # ``memory --ddp``/``--fsdp2``: what one rank holds
    fit: Optional[FitReport] = None  # ``memory --fit``/``--budgets``: the step's predicted peak, per budget
    shapes: Optional[ShapeReport] = None  # ``cudagraphs --schedule``: the loop's schedule, step by step

    def to_dict(self) -> dict:
        from graphtool.schema import stamped

        body = self.report.to_dict()
        return stamped(self.command, {"model": self.header, **(body if not self.key else {self.key: body}),
                                      **(self.wrapped.to_dict() if self.wrapped is not None else {}),
                                      **({"rank_memory": self.rank.to_dict()} if self.rank is not None else {}),
                                      **({"fit": self.fit.to_dict()} if self.fit is not None else {}),
                                      **({"shapes": self.shapes.to_dict()} if self.shapes is not None else {})})

    def summary(self) -> str:
        return self.report.verdict()

    def body(self, **options):
        """The report's own view, below what every model's view starts with."""
        raise NotImplementedError

    def view(self, **options):
        """A model torch.compile captured no graph of says so first, then :meth:`body` (``options``: the
        command's view options, such as mutations' ``show_all``)."""
        if not self.header.get("no_graph"):
            return self.body(**options)
        from rich.console import Group
        from rich.text import Text

        return Group(Text(f"torch.compile captured no graph: {self.header['no_graph']}", style="verdict.bad"),
                     self.body(**options))

    @property
    def title(self) -> str:
        return self.header.get("entry") or "model"
