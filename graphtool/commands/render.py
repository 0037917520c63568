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

from graphtool.commands import shared
from graphtool.commands.progress import SILENT, Progress
from graphtool.errors import UsageError

GRAPHS = ("autograd", "forward", "backward", "joint")
COLLAPSE = ("auto", "module", "none")


@dataclass(frozen=True)
class RenderResult:
    output: Path
    nodes: int
    edges: int
    renderer: str  # the layout program, or "none" for DOT text
    note: Optional[str]  # how the picture was folded, when it was


def check_options(graph: str, collapse: str, depth: Optional[int]) -> None:
    if graph not in GRAPHS:
        raise UsageError(f"--graph {graph!r} is not one of {', '.join(GRAPHS)}")
    if collapse not in COLLAPSE:
        raise UsageError(f"--collapse {collapse!r} is not one of {', '.join(COLLAPSE)}")
    if depth is not None and depth < 1:
        raise UsageError("--depth must be 1 or more")


def default_output(target: str, graph: str, fmt: Optional[str]) -> Path:
    return Path(f"{Path(target.split(':')[0]).stem}-{graph}.{fmt or 'svg'}")


def drawing(model: Optional[str] = None, *, entry: Optional[str] = None, device: Optional[str] = None,
            graph: str = "autograd", saved: bool = False, region: int = 0, collapse: str = "auto",
            depth: Optional[int] = None, backend: str = "inductor", debug: bool = False, progress: Progress = SILENT):
    """The first model's graph as a Drawing, folded by module when ``collapse`` says so."""
    from graphtool.analysis.drawing import OPEN_LIMIT, auto_depth, opening_depth
    from graphtool.analysis.drawing import collapse as fold

    check_options(graph, collapse, depth)
    shared.check_aot_backend(backend)
    target, ent = shared.targets(model, entry)[0]
    # modules are drawn as clusters even when nothing folds: they keep the layout local and fast
    picture = _build(target, ent, device, graph, saved, region, modules=True, backend=backend,
                     debug=debug, progress=progress)
    size = sum(1 for n in picture.nodes if n.kind != "output")
    halves = len({n.cluster for n in picture.nodes if n.cluster}) or 1  # joint: forward and backward
    if collapse == "module" or (collapse == "auto" and opening_depth(picture, OPEN_LIMIT * halves) is not None):
        level = depth or auto_depth(picture, limit=OPEN_LIMIT * halves)
        picture = fold(picture, level)
        shown = sum(1 for n in picture.nodes if n.kind != "output")  # output markers are not boxes
        note = f"{size} nodes folded by module at depth {level} into {shown} boxes (--collapse none draws all)"
        picture = replace(picture, note=note)
        progress.note(note)
    return picture


def render(model: Optional[str] = None, *, output: Optional[Path] = None, fmt: Optional[str] = None,
           timeout: Optional[float] = None, progress: Progress = SILENT, **options) -> RenderResult:
    """Draw the graph and lay it out into ``output`` (default ``MODEL-GRAPH.svg`` here)."""
    from graphtool.render.dot import to_dot
    from graphtool.render.layout import FORMATS, render_file

    check_options(options.get("graph", "autograd"), options.get("collapse", "auto"), options.get("depth"))
    target, _ = shared.targets(model, options.get("entry"))[0]
    if output is None:
        output = default_output(target, options.get("graph", "autograd"), fmt)
    fmt = fmt or (output.suffix.lstrip(".").lower() or "svg")
    if fmt not in FORMATS:
        raise UsageError(f"format {fmt!r} is not one of {', '.join(FORMATS)} (from --format or the file name)")
    from graphtool.capture.user.deadline import check_timeout, deadline

    started = time.monotonic()
    with deadline(check_timeout(timeout)):  # the trace; the layout, a child process, has its own limit
        picture = drawing(model, progress=progress, **options)
    left = None if timeout is None else max(timeout - (time.monotonic() - started), 0.001)
    progress.phase(f"laying out {len(picture.nodes)} nodes...")
    renderer = render_file(to_dot(picture), fmt, output, timeout=left)
    return RenderResult(output, len(picture.nodes), len(picture.edges), renderer, picture.note)


def _build(target, ent, device, graph, saved, region_index, *, modules: bool, backend: str, debug: bool,
           progress: Progress):
    if graph == "autograd":
        return _autograd(target, ent, device, saved, modules, progress)
    capture, accel = shared.trace_standin(target, ent, device, inference=False, backend=backend, debug=debug,
                                         progress=progress)
    if not capture.regions:
        raise UsageError(f"{target}: torch.compile captured no graph to draw")
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


def _autograd(target, ent, device, saved: bool, modules: bool, progress: Progress):
    from graphtool.analysis.drawing import autograd_drawing
    from graphtool.capture.autograd_graph import capture_autograd

    progress.phase("running the forward...")
    spec = shared.load(target, ent, device, progress)
    progress.phase("walking the autograd graph...")
    with shared.quiet_stdout():
        captured = capture_autograd(spec, saved=saved, modules=modules)
    if not captured.nodes:
        raise UsageError(
            f"{spec.location}: the model's outputs have no autograd history: nothing requires grad, "
            "so there is no autograd graph to draw",
            hint="draw the traced graph instead: --graph forward",
        )
    return autograd_drawing(captured, f"autograd graph of {Path(spec.path).name}")
