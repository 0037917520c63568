"""``memory --fit``/``--budgets`` at 80 columns: the answer, the step's phases eager beside compiled, the biggest
contributors at the user's lines, and the activation-budget sweep::

    will it fit: fits L4 (24.0 GiB) with 22.5 GiB spare (predicted step peak 1.5 GiB); eager 1.6 GiB
      step peak     forward   backward  optimizer       peak
      eager               -    1.6 GiB  470.6 MiB    1.6 GiB
      compiled    981.4 MiB    1.3 GiB  470.6 MiB    1.3 GiB
      biggest: activations saved at decoder.py:12 512.0 MiB, optimizer state ...
    activation_memory_budget   saved   recomputed   step peak
      1.0                  640.0 MiB          12     1.3 GiB
      0.5                  ...                       ...  (rises)
"""

from __future__ import annotations

import os

from rich.console import Group
from rich.text import Text

from graphtool.render.tables import wrapped


def _b(n) -> str:
    from graphtool.analysis.memory.saved import format_bytes

    return "-" if n is None else format_bytes(n)


def _short(source: str | None) -> str:
    if not source:
        return ""
    path, _, line = source.rpartition(":")
    return f"{os.path.basename(path)}:{line}" if path else source


def fit_view(fit, width: int = 78) -> Group:
    lines = []
    head = fit.verdict or f"predicted step peak: compiled {_b(fit.compiled.peak)}" + (
        f", eager {_b(fit.eager.peak)}" if fit.eager else "")
    lines.extend(wrapped("will it fit: " + head, width, "", "  ", "bold"))
    lines.append(Text(f"  {'step peak':<12} {'forward':>10} {'backward':>10} {'optimizer':>10} {'peak':>10}"))
    for s in (fit.eager, fit.compiled):
        if s is not None:
            lines.append(Text(f"  {s.label:<12} {_b(s.forward):>10} {_b(s.backward):>10} {_b(s.optimizer):>10} "
                              f"{_b(s.peak):>10}"))
    h = fit.held
    held = (f"held: parameters {_b(h.parameters)}, gradients {_b(h.gradients)}, optimizer state "
            f"{_b(h.optimizer_state) if h.optimizer_state is not None else 'none (no get_optimizer)'}, inputs "
            f"{_b(h.inputs)}" + (f", cuBLAS workspaces {_b(h.workspace)}" if h.workspace else ""))
    lines.extend(wrapped(held, width))
    if fit.contributors:
        parts = [f"{c.what}{' ' + _short(c.source) if c.source else ''} {_b(c.bytes)}" for c in fit.contributors]
        lines.extend(wrapped("biggest: " + "; ".join(parts), width))
    if fit.budgets:
        lines.append(Text(""))
        lines.append(Text(f"{'activation_memory_budget':<25} {'saved':>10} {'recomputed':>10} {'step peak':>10}",
                          style="bold"))
        for p in fit.budgets:
            mark = ""
            if p.rises:
                mark += "  rises"
            if p.fits is not None:
                mark += "  fits" if p.fits else "  over"
            if fit.fit_budget is not None and p.budget == fit.fit_budget:
                mark += " <"
            lines.append(Text(f"  {p.budget:<23g} {_b(p.saved_bytes):>10} {p.recomputed_ops:>10} "
                              f"{_b(p.step.peak):>10}{mark}"))
        key = ("recomputed: forward ops the backward runs again (views not counted); rises: the peak is higher "
               "than at a larger budget; <: the largest budget that fits")
        lines.extend(wrapped(key, width, "  ", "  ", "dim"))
    for note in fit.notes:
        lines.extend(wrapped(note, width, "  note: ", "        ", "dim"))
    return Group(*lines)
