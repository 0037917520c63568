"""``graphtool trace``: forward and backward graphs of every compiled region, every input named."""

from __future__ import annotations

import os
from pathlib import Path

import typer

from graphtool.cli import console, options


def register(app: typer.Typer) -> None:
    options.register(app, "trace", (
        "Trace a model through dynamo and AOT autograd and report its graphs.\n\n"
    ) + options.examples(
        "graphtool trace                        # the bundled example",
        "graphtool trace model.py --format json > report.json",
        "graphtool trace model.py:build --device meta --out traced/",
        "graphtool trace model.py --fsdp2 --world-size 8   # FSDP2 as 8 ranks see it",
    ), show=_show, ask=_ask)


def _ask(sessions, own, view) -> list:
    # absolute before the user's code runs: a script that calls os.chdir() must not move the files
    view["out_dir"] = Path(os.path.abspath(view["out"])) if view["out"] is not None else None
    return [s.trace(**own, graph_code=view["out"] is not None) for s in sessions]


def _show(results, view) -> int:
    out, out_dir, fmt = view["out"], view["out_dir"], view["format"]
    for result in results:
        if out_dir is not None:
            sub = Path() if len(results) == 1 else Path(Path(result.target).stem)
            _write_out(result, out_dir / sub, Path(out) / sub)
        if fmt == "table":  # the report, the verdict, DDP or FSDP2, and one summary line at the very end
            console.print_view(result.view(verbose=view["verbose"], quiet=view["quiet"]))
    if out_dir is not None:
        _remove_earlier_models(out_dir, results)
    if fmt != "table":
        console.emit_all([r.to_dict() for r in results], fmt)
    # --ddp: a loop of this model would fail on its second step (parameters without gradient)
    return console.EXIT_FINDINGS if any(r.found for r in results) else 0


#: the files ``--out`` writes: an earlier run's that this run does not write again are removed
GRAPH_FILES = r"(forward|backward)(_region\d+)?\.py"


def _remove_earlier_models(out_dir: Path, results) -> None:
    """What an earlier run wrote for models this run does not describe: a single model's files at the
    top (now several models, one folder each), a folder per model of an earlier config run (now one
    model, or other models). Only graphtool's own files go, and a folder only when that empties it."""
    from graphtool.render.documents import remove_earlier_run

    written = {Path(r.target).stem for r in results} if len(results) > 1 else set()
    if len(results) > 1:
        remove_earlier_run(out_dir, [], GRAPH_FILES, reports=["report.json"])
    try:
        subs = [e for e in os.scandir(out_dir) if e.is_dir(follow_symlinks=False) and e.name not in written]
    except OSError:
        return
    for sub in subs:
        if not os.path.isfile(os.path.join(sub.path, "report.json")):
            continue  # not a folder graphtool wrote
        remove_earlier_run(Path(sub.path), [], GRAPH_FILES, reports=["report.json"])
        try:
            os.rmdir(sub.path)
        except OSError:
            pass  # the user's files are in it: the folder stays


def _write_out(result, folder: Path, shown: Path) -> None:
    """Write one model's files into ``folder`` (absolute); the folder then holds this run alone:
    graphtool's own files from an earlier run (``forward_region1.py``...) go, the user's stay."""
    from graphtool.render.documents import format_json, remove_earlier_run, write_all

    files = {folder / name: text for name, text in (result.graph_code or {}).items()}
    files[folder / "report.json"] = format_json(result.to_dict())
    write_all(files)
    remove_earlier_run(folder, files, GRAPH_FILES)
    console.say(f"wrote {len(files)} files to {shown}")
