"""``graphtool memory``: what training keeps for backward, eager beside compiled, per line, module or op."""

from __future__ import annotations

import typer

from graphtool.cli import console, options


def bare_budgets(argv: list[str]) -> list[str]:
    """``memory --budgets`` (or ``report --budgets``) with no list after it sweeps the default budgets: give it the value ``default``.

    >>> bare_budgets(["memory", "m.py", "--budgets"]), bare_budgets(["memory", "--budgets", "m.py"])
    (['memory', 'm.py', '--budgets', 'default'], ['memory', '--budgets', 'default', 'm.py'])
    >>> bare_budgets(["memory", "--budgets", "1,0.5", "m.py"])
    ['memory', '--budgets', '1,0.5', 'm.py']
    """
    import os

    if not argv or argv[0] not in ("memory", "report") or "--budgets" not in argv:
        return argv
    out = list(argv)
    i = out.index("--budgets")
    following = out[i + 1] if i + 1 < len(out) else None
    if following is None or following.startswith("--") or following.endswith(".py") or os.sep in following \
            or ":" in following or os.path.exists(following):
        out.insert(i + 1, "default")
    return out


def register(app: typer.Typer) -> None:
    options.register(app, "memory", (
        "What training keeps for backward: parameters, gradients and every saved activation\n"
        "(shape, dtype, bytes, op, your line, module), eager autograd beside the compiled graphs,\n"
        "and what the compiled version recomputes instead of saving.\n\n"
    ) + options.examples(
        "graphtool memory model.py",
        "graphtool memory model.py --by module --depth 2 --backend aot_eager",
        "LLAMA_SIZE=7b graphtool memory examples/hf_llama.py --device meta \\",
        "    --format json",
        "graphtool memory model.py --ddp --world-size 8   # what each rank holds",
        "graphtool memory model.py --fsdp2 --world-size 8 # each rank's shards",
        "graphtool memory model.py --fit 24GiB --budgets  # will the step fit",
        "graphtool memory model.py --fit H100 --budgets 1,0.5,0.1",
        "graphtool memory model.py --schedule   # at the schedule's largest step",
    ), show=_show)


def _show(results, view) -> int:
    if view["format"] == "table":
        for r in results:
            console.print_view(r)
    else:
        console.emit_all([r.to_dict() for r in results], view["format"])
    return 0
