"""``graphtool render``: the autograd, forward, backward or joint graph as a picture.

:func:`drawing` builds the picture's model (a :class:`~graphtool.analysis.drawing.Drawing`, folded
by module when large); :func:`render` also lays it out into a file.

Example::

    >>> d = drawing("examples/mlp.py", graph="forward")
    >>> d.title
    'forward graph of mlp.py'
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Optional

from graphtool.commands.progress import quiet_stdout
from graphtool.commands.session import each
from graphtool.errors import UsageError

GRAPHS = ("autograd", "forward", "backward", "joint")
COLLAPSE = ("auto", "module", "none")


@dataclass(frozen=True)
class RenderResult:
    output: Optional[Path]  # the file written, or None: ``text`` is the picture
    nodes: int
    edges: int
    renderer: str  # the layout program, or "none" for DOT text
    note: Optional[str]  # how the picture was folded, when it was
    text: Optional[str] = None  # the DOT or SVG text, when no file was asked for

    def _repr_svg_(self) -> Optional[str]:
        return self.text if self.text is not None and not self.text.startswith("digraph") else None


def check_options(graph: str, collapse: str, depth: Optional[int]) -> None:
    if graph not in GRAPHS:
        raise UsageError(f"--graph {graph!r} is not one of {', '.join(GRAPHS)}")
    if collapse not in COLLAPSE:
        raise UsageError(f"--collapse {collapse!r} is not one of {', '.join(COLLAPSE)}")
    if depth is not None and depth < 1:
        raise UsageError("--depth must be 1 or more")


def default_output(target: str, graph: str, fmt: Optional[str]) -> Path:
    return Path(f"{Path(target.split(':')[0]).stem}-{graph}.{fmt or 'svg'}")


def drawing(model=None, **options):
    """The first model's graph as a Drawing, folded by module when ``collapse`` says so."""
    return each("render", model, {**options, "fmt": "drawing"}, first=True)


def render(model=None, **options) -> RenderResult:
    """Draw the first model's graph and lay it out into ``output`` (default ``MODEL-GRAPH.svg`` here)."""
    from graphtool.commands.session import targets

    target = targets(model, options.get("entry"))[0][0]
    output = options.get("output") or default_output(target, options.get("graph", "autograd"), options.get("fmt"))
    return each("render", model, {**options, "output": output}, first=True)


def run(session, *, graph: str, output: Optional[Path], fmt: Optional[str],
        collapse: str, depth: Optional[int], saved: bool, region: int):
    """The graph as a picture: written to ``output`` (its format from ``fmt`` or the file name), else its DOT text
    (``fmt="dot"``) or SVG text (the default) in :attr:`RenderResult.text`; ``fmt="drawing"``: the
    :class:`~graphtool.analysis.drawing.Drawing` itself."""
    from graphtool.analysis.drawing import OPEN_LIMIT, auto_depth, opening_depth
    from graphtool.analysis.drawing import collapse as fold
    from graphtool.render.dot import to_dot
    from graphtool.render.layout import FORMATS, render_file

    session.launch.check("render", alone=True)
    check_options(graph, collapse, depth)
    if output is not None:
        output = Path(output)
        fmt = fmt or (output.suffix.lstrip(".").lower() or "svg")
        if fmt not in FORMATS:
            raise UsageError(f"format {fmt!r} is not one of {', '.join(FORMATS)} (from --format or the file name)")
    elif fmt not in (None, "svg", "dot", "drawing"):
        raise UsageError(f"fmt={fmt!r}: without output= graphtool returns 'dot' or 'svg' text; pass output= for {fmt}")
    from graphtool.capture.user.deadline import deadline

    started = time.monotonic()
    with deadline(session.timeout):  # the trace; the layout, a child process, gets what is left of --timeout
        # modules are drawn as clusters even when nothing folds: they keep the layout local and fast
        picture = _build(session, graph, saved, region)
    size = sum(1 for n in picture.nodes if n.kind != "output")
    halves = len({n.cluster for n in picture.nodes if n.cluster}) or 1  # joint: forward and backward
    if collapse == "module" or (collapse == "auto" and opening_depth(picture, OPEN_LIMIT * halves) is not None):
        level = depth or auto_depth(picture, limit=OPEN_LIMIT * halves)
        picture = fold(picture, level)
        shown = sum(1 for n in picture.nodes if n.kind != "output")  # output markers are not boxes
        note = f"{size} nodes folded by module at depth {level} into {shown} boxes (--collapse none draws all)"
        picture = replace(picture, note=note)
        session.progress.note(note)
    if fmt == "drawing":
        return picture
    dot = to_dot(picture)
    if output is None:
        from graphtool.render.report import layout_svg

        text = dot if fmt == "dot" else layout_svg(dot)
        return RenderResult(None, len(picture.nodes), len(picture.edges), "none", picture.note, text)
    left = None if session.timeout is None else max(session.timeout - (time.monotonic() - started), 0.001)
    session.progress.phase(f"laying out {len(picture.nodes)} nodes...")
    renderer = render_file(dot, fmt, output, timeout=left)
    return RenderResult(output, len(picture.nodes), len(picture.edges), renderer, picture.note)


def _build(session, graph, saved, region_index):
    if graph == "autograd":
        return _autograd(session, saved)
    capture, accel, _ = session.first_step()
    if not capture.regions:
        raise UsageError(f"{capture.spec.path}: torch.compile captured no graph to draw")
    if region_index >= len(capture.regions):
        raise UsageError(f"--region {region_index}: the model has {len(capture.regions)} compiled region(s)")
    from graphtool.analysis.drawing import fx_drawing, fx_highlights, joint_drawing

    region = capture.regions[region_index]
    model = capture.spec.model
    from graphtool.capture.user.script import is_module

    classes = {n: type(m).__name__ for n, m in model.named_modules()} if is_module(model) else {}
    if graph == "backward" and region.backward is None:
        raise UsageError("the model was traced without a backward graph (nothing requires grad)")

    def draw(kind, **extra):
        gm = region.forward if kind == "forward" else region.backward
        return fx_drawing(gm, kind, region, highlights=fx_highlights(region, kind), classes=classes,
                          main_device=accel, **extra)

    if graph == "backward":
        picture = draw("backward")
    elif graph == "joint" and region.backward is not None:
        picture = joint_drawing(draw("forward", prefix="fw_", cluster="forward"),
                                draw("backward", prefix="bw_", cluster="backward"))
    else:  # forward, or joint of a forward-only trace
        picture = draw("forward")
    note = f"region {region_index} of {len(capture.regions)}" if len(capture.regions) > 1 else None
    return replace(picture, title=f"{picture.title} of {Path(capture.spec.path).name}", note=note)


def _autograd(session, saved: bool):
    from graphtool.analysis.drawing import autograd_drawing
    from graphtool.capture.autograd_graph import capture_autograd

    session.progress.phase("running the forward...")
    spec = session.spec()
    session.progress.phase("walking the autograd graph...")
    with quiet_stdout():
        captured = capture_autograd(spec, saved=saved, modules=True)
    if not captured.nodes:
        raise UsageError(
            f"{spec.location}: the model's outputs have no autograd history: nothing requires grad, "
            "so there is no autograd graph to draw",
            hint="draw the traced graph instead: --graph forward",
        )
    return autograd_drawing(captured, f"autograd graph of {Path(spec.path).name}")
