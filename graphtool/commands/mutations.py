"""``graphtool mutations``: which inputs each model mutates, and which outputs alias inputs.

Example::

    >>> [r.report.verdict() for r in mutations("examples/mutate_input.py")]
    ['1 user input mutated']
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Optional

from graphtool.commands import steps
from graphtool.commands.progress import SILENT, Progress


def mutations(model: Optional[str] = None, *, entry: Optional[str] = None, device: Optional[str] = None,
              inference: bool = False, backend: str = "inductor", allow: Sequence[str] = (), debug: bool = False,
              progress: Progress = SILENT) -> list[steps.ModelResult]:
    """One :class:`ModelResult` (a MutationReport) per model; ``found`` when anything is mutated or aliased
    that ``allow`` (kinds such as ``buffers``, or FQN patterns) does not accept."""
    from graphtool.analysis.mutations import analyze_mutations, is_allowed

    steps.check_backend(backend)
    results = []
    for target, ent in steps.targets(model, entry):
        capture = steps.trace_own_device(target, ent, device, inference, backend=backend, record_breaks=False,
                                         debug=debug, progress=progress)
        report = analyze_mutations(capture)
        accepted = allowed_for(target, allow) if isinstance(target, str) else tuple(allow)  # an object: no config
        unexpected = [m for m in report.mutated if not is_allowed(m, accepted)]
        found = bool(unexpected or report.aliased_outputs or report.input_aliases or capture.no_graph)
        results.append(steps.ModelResult(steps.model_header(capture), report, found, key=""))
    return results


def allowed_for(target: str, allow: Sequence[str] = ()) -> tuple[str, ...]:
    """What ``--check`` accepts for ``target``: the command line's ``--allow``, and the config's
    ``allow_mutations`` (the model's own, else the config's default) when the current folder has a config."""
    from graphtool.config import find_config, load_config

    found = find_config()
    configured = load_config(found).allowed_mutations(target) if found is not None else ()
    return tuple(allow) + tuple(a for a in configured if a not in allow)
