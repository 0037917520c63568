"""``graphtool report``: one self-contained HTML page with every fact about a model."""

from __future__ import annotations

import os
import shlex
from pathlib import Path

import typer

from graphtool.cli import console, options


def register(app: typer.Typer) -> None:
    options.register(app, "report", (
        "Write one self-contained HTML report: summary, findings with their source and fix, each region's\n"
        "forward and backward pictures (pan, zoom, fold by module, search, click a node for its facts),\n"
        "mutations, devices, the CUDA-graph verdict and memory. Opens offline in any browser.\n\n"
    ) + options.examples(
        "graphtool report model.py -o report.html",
        "graphtool report model.py:build --device meta --no-memory",
        "graphtool report model.py --fsdp2 --world-size 8 -o fsdp2.html",
        "graphtool report model.py --fit 24GiB --budgets   # and will it fit",
        "graphtool report model.py --schedule   # and the loop's shapes",
    ), show=_show, ask=_ask)


def _ask(sessions, own, view) -> list:
    """Each model's report, its page made (the command line that makes it again on it), not yet written."""
    from dataclasses import replace

    from graphtool.commands.report import default_output

    output = own.pop("output")
    if output is None:
        output = default_output(sessions[0].target) if len(sessions) == 1 else Path("report.html")
    _check_output(output)
    view["output"], view["target"] = output, Path(os.path.abspath(output))  # a script's os.chdir() must not move it
    results = [s.report(**own) for s in sessions]
    command = _command({**view["argv"], "output": output})
    s = sessions[0]
    s.progress.phase("writing the page...")
    results = [replace(r, made_by=command) for r in results]
    for r in results:
        r.html()  # laid out while the progress line says so
    return results


def _show(results, view) -> int:
    from graphtool.render.documents import write_atomic

    output, target = view["output"], view["target"]
    for result in results:
        page = result.html()
        path = target if len(results) == 1 else target.with_name(f"{target.stem}-{Path(result.target.split(':')[0]).stem}{target.suffix}")
        write_atomic(path, page)
        shown = output if len(results) == 1 else path
        console.say(f"wrote {shown} ({len(page.encode('utf-8')) / 1e6:.2f} MB): {result.summary()}")
    return 0


def _command(given: dict) -> str:
    """The command line that makes this report again: MODEL and each option given that is not the table's default
    (the options, not graphtool's own argv: ``run([...])`` in-process has none; ``--timeout`` changes no fact)."""
    from graphtool.commands.options import COMMANDS, LOAD
    from graphtool.display_paths import display_path

    cmd = COMMANDS["report"]
    parts = ["graphtool", "report"] + ([display_path(given["model"])] if given.get("model") else [])
    for o in [o for o in LOAD if o.name in cmd.load and o.name != "timeout"] + list(cmd.options):
        value = given.get(o.name)
        if value is None or value == o.default:
            continue
        parts += ([o.cli] if value else [o.off]) if isinstance(value, bool) else [o.short or o.cli, str(value)]
    return " ".join(shlex.quote(p) for p in parts)


def _check_output(output: Path) -> None:
    """A folder, or a path under a file, is refused before any tracing is spent."""
    from graphtool.errors import UsageError

    if output.is_dir():
        raise UsageError(f"cannot write {output}: it is a folder", hint="give a file name, e.g. -o report.html")
    blocker = next((p for p in output.parents if p.exists() and not p.is_dir()), None)
    if blocker is not None:
        raise UsageError(f"cannot write {output}: {blocker} is a file, not a folder", hint="choose a writable output path")
