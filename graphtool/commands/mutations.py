"""``graphtool mutations``: which inputs each model mutates, and which outputs alias inputs.

Example::

    >>> [r.report.verdict() for r in mutations("examples/mutate_input.py")]
    ['1 user input mutated']
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from graphtool.commands.result import ModelResult, model_header
from graphtool.commands.session import per_model

if TYPE_CHECKING:
    from graphtool.analysis.mutations import MutationReport


@dataclass(frozen=True, repr=False)
class MutationsResult(ModelResult):
    """One model's MutationReport; ``allowed``: what ``--check`` accepted (``--allow``, the config's
    ``allow_mutations``; the API's ``allow=``), listed and not counted as findings. ``python``: the model
    came as an object, so a finding says how to accept it as the API takes it (``allow=[...]``)."""

    report: MutationReport

    command = "mutations"

    allowed: tuple = ()
    python: bool = False

    def _accept(self):
        from graphtool.analysis.diagnostics import cli_allow, python_allow

        return python_allow if self.python else cli_allow

    def body(self, *, show_all: bool = False):
        from graphtool.render.mutations import mutations_view

        return mutations_view(self.report, show_all=show_all, allowed=self.allowed, accept=self._accept())

    def diagnostics(self) -> str:
        from graphtool.analysis.diagnostics import mutation_diagnostics
        from graphtool.analysis.mutations import is_allowed
        from graphtool.render.diagnostics import format_diagnostics

        accepted = {m.name for m in self.report.mutated if is_allowed(m, self.allowed)}
        return format_diagnostics(mutation_diagnostics(self.report, skip=accepted, model=None, accept=self._accept()))

    def sections(self) -> list[str]:
        from graphtool.render.report import mutations_section

        return [mutations_section(self.report)]

    @property
    def mutated_inputs(self) -> list:
        """Inputs the model mutates (``InputMutation``: ``name``, ``kind``, ``source``)."""
        return list(self.report.mutated)


mutations = per_model("mutations")


def run(session, *, allow: Sequence[str]) -> MutationsResult:
    """The session's own-device trace read for mutations; ``found`` when anything is mutated or aliased that ``allow``
    (kinds such as ``buffers``, or FQN patterns) does not accept."""
    from graphtool.analysis.mutations import analyze_mutations, is_allowed

    capture = session.own_trace()[0]
    report = analyze_mutations(capture)
    header = model_header(capture)
    # the script's file, as the config names it (a target "m.py:build" is no path); an object: no config
    accepted = tuple(allow or ()) if session.is_object else allowed_for(header["path"], allow or ())
    unexpected = [m for m in report.mutated if not is_allowed(m, accepted)]
    found = bool(unexpected or report.aliased_outputs or report.input_aliases or capture.no_graph)
    return MutationsResult(header, report, found, allowed=accepted, python=session.is_object)


def allowed_for(target: str, allow: Sequence[str] = ()) -> tuple[str, ...]:
    """What ``--check`` accepts for ``target``: the command line's ``--allow``, and the config's
    ``allow_mutations`` (the model's own, else the config's default) when the current folder has a config."""
    from graphtool.config import find_config, load_config

    found = find_config()
    configured = load_config(found).allowed_mutations(target) if found is not None else ()
    return tuple(allow) + tuple(a for a in configured if a not in allow)
