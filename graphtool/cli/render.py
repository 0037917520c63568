"""``graphtool render``: autograd and forward/backward/joint graphs drawn with Graphviz."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from graphtool.cli import common
from graphtool.errors import UsageError

GRAPHS = ("autograd", "forward", "backward", "joint")
COLLAPSE = ("auto", "module", "none")


def register(app: typer.Typer) -> None:
    app.command(
        "render",
        help=(
            "Draw the autograd graph, or the forward, backward or joint AOT graph, with Graphviz.\n\n"
            "Large graphs fold into one box per module, and identical repeated blocks into one\n"
            "(\"12 x TransformerEncoderLayer\"), above 500 nodes unless --collapse none.\n\n"
            "Examples:\n\n"
            "  graphtool render model.py                          # model-autograd.svg\n\n"
            "  graphtool render model.py --graph joint -o joint.png\n\n"
            "  graphtool render model.py --collapse module --depth 2 --saved"
        ),
    )(render)


def render(
    model: Optional[str] = common.ModelArg,
    entry: Optional[str] = common.EntryOpt,
    device: Optional[str] = common.DeviceOpt,
    graph: str = typer.Option("autograd", "--graph", "-g", help="autograd, forward, backward or joint."),
    output: Optional[Path] = typer.Option(None, "--output", "-o", help="Output file (default: MODEL-GRAPH.svg here)."),
    fmt: Optional[str] = typer.Option(None, "--format", "-f", help="svg, png, pdf or dot (default: from the file name, else svg)."),
    collapse: str = typer.Option("auto", "--collapse", help="auto (fold by module above 500 nodes), module, or none."),
    depth: Optional[int] = typer.Option(None, "--depth", help="Module level to fold at (1 = the model's children; default: the deepest that stays readable)."),
    saved: bool = typer.Option(False, "--saved", help="Autograd graph: show each node's saved tensors' shapes."),
    region: int = typer.Option(0, "--region", help="Which compiled region (after graph breaks) to draw."),
    timeout: Optional[float] = typer.Option(None, "--timeout", help="Stop a layout that takes longer than this many seconds."),
) -> int:
    from graphtool.render.layout import FORMATS

    if graph not in GRAPHS:
        raise UsageError(f"--graph {graph!r} is not one of {', '.join(GRAPHS)}")
    if collapse not in COLLAPSE:
        raise UsageError(f"--collapse {collapse!r} is not one of {', '.join(COLLAPSE)}")
    if depth is not None and depth < 1:
        raise UsageError("--depth must be 1 or more")
    target, ent = common.targets(model, entry)[0]
    if output is None:
        output = Path(f"{Path(target.split(':')[0]).stem}-{graph}.{fmt or 'svg'}")
    fmt = fmt or (output.suffix.lstrip(".").lower() or "svg")
    if fmt not in FORMATS:
        raise UsageError(f"format {fmt!r} is not one of {', '.join(FORMATS)} (from --format or the file name)")
    vg = _build(target, ent, device, graph, saved, region, modules=collapse != "none")
    from graphtool.analysis.drawing import COLLAPSE_THRESHOLD, auto_depth, collapse as fold

    err = common.stderr_console()
    size = len(vg.nodes)
    if collapse == "module" or (collapse == "auto" and size > COLLAPSE_THRESHOLD):
        level = depth or auto_depth(vg)
        vg = fold(vg, level)
        note = f"{size} nodes folded by module at depth {level} into {len(vg.nodes)} boxes (--collapse none draws all)"
        vg = type(vg)(vg.title, vg.nodes, vg.edges, note)
        err.print(f"note: {note}", highlight=False, markup=False)
    from graphtool.render.dot import to_dot
    from graphtool.render.layout import render_file

    with err.status(f"laying out {len(vg.nodes)} nodes..."):
        renderer = render_file(to_dot(vg), fmt, output, timeout=timeout)
    err.print(f"wrote {output} ({len(vg.nodes)} nodes, {len(vg.edges)} edges" + (f", laid out by {renderer})" if renderer != "none" else ")"), highlight=False, markup=False)
    return 0


def _build(target, ent, device, graph, saved, region_index, *, modules: bool = True):
    if graph == "autograd":
        with common.stderr_console().status("running the forward...") as status, common.quiet_stdout():
            from graphtool.capture import compat

            compat.import_torch()
            compat.freeze_gc_after_import()
            from graphtool.capture.autograd_graph import capture_autograd
            from graphtool.capture.script import load_model

            spec = load_model(target, entry=ent, device=device)
            status.update("walking the autograd graph...")
            from graphtool.analysis.drawing import autograd_drawing

            captured = capture_autograd(spec, saved=saved, modules=modules)
            if not captured.nodes:
                raise UsageError(
                    f"{spec.location}: the model's outputs have no autograd history: nothing requires grad, "
                    "so there is no autograd graph to draw",
                    hint="draw the traced graph instead: --graph forward",
                )
            return autograd_drawing(captured, f"autograd graph of {Path(spec.path).name}")
    capture, accel = common.load_and_trace_standin(target, ent, device, inference=False)
    if not capture.regions:
        raise UsageError(f"{target}: torch.compile captured no graph to draw")
    if region_index >= len(capture.regions):
        raise UsageError(f"--region {region_index}: the model has {len(capture.regions)} compiled region(s)")
    from graphtool.analysis.drawing import fx_highlights, fx_drawing, joint_drawing

    region = capture.regions[region_index]
    classes = {n: type(m).__name__ for n, m in capture.spec.model.named_modules()} if hasattr(capture.spec.model, "named_modules") else {}
    if graph == "backward" and region.backward is None:
        raise UsageError("the model was traced without a backward graph (nothing requires grad)")

    def draw(kind, **extra):
        gm = region.forward if kind == "forward" else region.backward
        return fx_drawing(gm, kind, region, highlights=fx_highlights(region, kind), classes=classes, main_device=accel, **extra)

    if graph == "backward":
        vg = draw("backward")
    elif graph == "joint" and region.backward is not None:
        vg = joint_drawing(draw("forward", prefix="fw_", cluster="forward"), draw("backward", prefix="bw_", cluster="backward"))
    else:  # forward, or joint of a forward-only trace
        vg = draw("forward")
    name = Path(capture.spec.path).name
    note = f"region {region_index} of {len(capture.regions)}" if len(capture.regions) > 1 else None
    return type(vg)(f"{vg.title} of {name}", vg.nodes, vg.edges, note)
