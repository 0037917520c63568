"""``memory --fit``/``--budgets`` at 80 columns: the answer, the step's phases eager beside compiled, the biggest
contributors at the user's lines, and the activation-budget sweep::

    will it fit: fits L4 (24.0 GiB) with 22.5 GiB spare (predicted step peak 1.5 GiB); eager 1.6 GiB
      step peak     forward   backward  optimizer       peak
      eager               -    1.6 GiB  470.6 MiB    1.6 GiB
      compiled    981.4 MiB    1.3 GiB  470.6 MiB    1.3 GiB
      r-overhead    1.3 GiB    1.5 GiB    1.3 GiB    1.5 GiB
      biggest: activations saved at decoder.py:12 512.0 MiB, optimizer state ...
    activation_memory_budget, swept
      budget        saved recomputed  step peak r-overhead
      1         640.0 MiB         12    1.3 GiB    1.5 GiB  fits <
      0.5       ...                                         rises  fits
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
    ro = getattr(fit, "reduce_overhead", None)
    for s in (fit.eager, fit.compiled, ro):
        if s is not None:
            label = "r-overhead" if s is ro else s.label
            lines.append(Text(f"  {label:<12} {_b(s.forward):>10} {_b(s.backward):>10} {_b(s.optimizer):>10} "
                              f"{_b(s.peak):>10}"))
    h = fit.held
    held = (f"held: parameters {_b(h.parameters)}, gradients {_b(h.gradients)}, optimizer state "
            f"{_b(h.optimizer_state) if h.optimizer_state is not None else 'none (no get_optimizer, no optimizer=)'}, inputs "
            f"{_b(h.inputs)}" + (f", cuBLAS workspaces {_b(h.workspace)}" if h.workspace else ""))
    lines.extend(wrapped(held, width))
    if ro is not None:
        lines.extend(wrapped(f"r-overhead: mode=\"reduce-overhead\"; its phases include the CUDA-graph pool, "
                             f"{_b(ro.pool)} (gradients and workspaces live in it)", width))
    if fit.contributors:
        parts = [f"{c.what}{' ' + _short(c.source) if c.source else ''} {_b(c.bytes)}" for c in fit.contributors]
        lines.extend(wrapped("biggest: " + "; ".join(parts), width))
    if fit.budgets:
        lines.append(Text(""))
        lines.extend(_sweep(fit, fit.budgets, "activation_memory_budget, swept", fit.fit_budget))
        for region in dict.fromkeys(p.region for p in getattr(fit, "region_budgets", ())):
            lines.append(Text(""))
            lines.extend(_sweep(fit, [p for p in fit.region_budgets if p.region == region],
                                f"region {region}'s own budget (region_activation_memory_budget), swept", None))
        key = ("recomputed: forward ops the backward runs again (views not counted); rises: the peak is higher "
               "than at a larger budget; <: the largest budget that fits")
        lines.extend(wrapped(key, width, "  ", "  ", "dim"))
    for note in fit.notes:
        lines.extend(wrapped(note, width, "  note: ", "        ", "dim"))
    return Group(*lines)


def _sweep(fit, points, title: str, fit_budget) -> list:
    ros = any(p.reduce_overhead is not None for p in points)
    lines = [Text(title, style="bold"),
             Text(f"  {'budget':<8} {'saved':>10} {'recomputed':>10} {'step peak':>10}"
                  + (f" {'r-overhead':>10}" if ros else ""))]
    for p in points:
        mark = ""
        if p.rises:
            mark += "  rises"
        if p.fits is not None:
            mark += "  fits" if p.fits else "  over"
        if fit_budget is not None and p.budget == fit_budget:
            mark += " <"
        ro_peak = f" {_b(p.reduce_overhead.peak if p.reduce_overhead else None):>10}" if ros else ""
        lines.append(Text(f"  {p.budget:<8g} {_b(p.saved_bytes):>10} {p.recomputed_ops:>10} "
                          f"{_b(p.step.peak):>10}{ro_peak}{mark}"))
    return lines


_PHASE_COLOURS = {"forward": "#2b6cb0", "backward": "#c05621", "optimizer": "#2f855a"}


def timeline_svg(fit, width: int = 720, height: int = 220) -> str:
    """The compiled step's live bytes, node by node (``fit.timeline``), as an inline SVG: one line per phase,
    the peak marked with its node, the named device's size as a dashed line when it is on the scale."""
    from html import escape

    from graphtool.analysis.memory.saved import format_bytes

    points = list(fit.timeline)
    if not points:
        return ""
    left, right, top, bottom = 72, 12, 14, 26
    top_bytes = max(p.bytes for p in points)
    low_bytes = min(p.bytes for p in points)
    target = fit.target.bytes if fit.target is not None else None
    high = max(top_bytes, target if target is not None and target <= 1.5 * top_bytes else 0)
    # held bytes (parameters, workspaces) can dwarf what the step makes: then the axis starts near the lowest point,
    # so the step's own rise and fall stays visible (the axis says where it starts)
    floor = 0 if low_bytes < 0.5 * high else max(0, low_bytes - (high - low_bytes) * 0.1)
    scale = (high - floor) * 1.08 or 1
    w, h = width - left - right, height - top - bottom

    def x(i: int) -> float:
        return left + (w * i / max(1, len(points) - 1))

    def y(b: int) -> float:
        return top + h - h * (b - floor) / scale

    parts = [f'<svg class="timeline" xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
             f'viewBox="0 0 {width} {height}" role="img" aria-label="live bytes through the compiled step">']
    for frac in (0, 0.5, 1):  # the axis: its floor, half way and its top
        b = int(floor + (high - floor) * frac)
        # a narrow axis (held bytes dwarf the step) in whole KiB, where one-decimal MiB would print one label thrice
        label = format_bytes(b) if high - floor >= 0.2 * high else f"{b / 1024:,.0f} KiB"
        parts.append(f'<line x1="{left}" x2="{width - right}" y1="{y(b):.1f}" y2="{y(b):.1f}" stroke="#ddd"/>'
                     f'<text x="{left - 6}" y="{y(b) + 4:.1f}" text-anchor="end" font-size="11">{escape(label)}</text>')
    start = 0
    for k in range(1, len(points) + 1):  # one polyline per run of one phase
        if k == len(points) or points[k].phase != points[start].phase:
            run = points[start:k]
            colour = _PHASE_COLOURS.get(run[0].phase, "#555")
            if len(run) == 1:
                parts.append(f'<circle cx="{x(start):.1f}" cy="{y(run[0].bytes):.1f}" r="3" fill="{colour}"/>')
            else:
                xy = " ".join(f"{x(start + j):.1f},{y(p.bytes):.1f}" for j, p in enumerate(run))
                parts.append(f'<polyline fill="none" stroke="{colour}" stroke-width="1.5" points="{xy}"/>')
            near_end = x(start) > width - right - 70
            at, anchor = ((width - right), "end") if near_end else (x(start) + 2, "start")
            parts.append(f'<text x="{at:.1f}" y="{height - 8}" font-size="11" fill="{colour}" '
                         f'text-anchor="{anchor}">{run[0].phase}</text>')
            start = k
    peak = max(range(len(points)), key=lambda i: points[i].bytes)
    p = points[peak]
    anchor = "end" if x(peak) > width / 2 else "start"
    parts.append(f'<circle cx="{x(peak):.1f}" cy="{y(p.bytes):.1f}" r="3.5" fill="#c53030"/>'
                 f'<text x="{x(peak) + (-6 if anchor == "end" else 6):.1f}" y="{y(p.bytes) - 6:.1f}" font-size="11" '
                 f'text-anchor="{anchor}" fill="#c53030">peak {escape(format_bytes(p.bytes))} at {escape(p.node)} '
                 f'({p.phase})</text>')
    if target is not None and floor <= target <= floor + scale:
        parts.append(f'<line x1="{left}" x2="{width - right}" y1="{y(target):.1f}" y2="{y(target):.1f}" stroke="#c53030" '
                     f'stroke-dasharray="5,4"/><text x="{width - right}" y="{y(target) - 4:.1f}" font-size="11" '
                     f'text-anchor="end" fill="#c53030">{escape(fit.target.label)}</text>')
    parts.append("</svg>")
    return "".join(parts)
