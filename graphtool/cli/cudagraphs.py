"""``graphtool cudagraphs``: would CUDA graphs be applied, region by region, and if not, why."""

from __future__ import annotations

import typer

from graphtool.cli import options


def register(app: typer.Typer) -> None:
    options.register(app, "cudagraphs", (
        "Would CUDA graphs be applied, region by region, and if not, why (torch's own checks,\n"
        "run on a stand-in trace: no GPU needed).\n\n"
    ) + options.examples(
        "graphtool cudagraphs model.py              # mode=\"reduce-overhead\"",
        "graphtool cudagraphs model.py --backend cudagraphs --check",
        "graphtool cudagraphs model.py --set graph_partition=false",
        "graphtool cudagraphs model.py --ddp --world-size 8    # each DDP split",
        "graphtool cudagraphs model.py --fsdp2 --world-size 8  # each block graph",
        "graphtool cudagraphs model.py --schedule   # over get_input_schedule()",
    ))
