"""``graphtool shapes``: compiles, recompiles and CUDA-graph recordings over a loop whose shapes change."""

from __future__ import annotations

import typer

from graphtool.cli import options


def register(app: typer.Typer) -> None:
    options.register(app, "shapes", (
        "What torch.compile does over a loop whose input shapes change, step by step and in total, on\n"
        "a stand-in (no GPU): each compile and recompile with its guard failure, sizes turned symbolic,\n"
        "recompile_limit (then eager), CUDA graphs recorded per size under reduce-overhead; advice\n"
        "(pad to buckets, mark dynamic), each checked by predicting again. The schedule: --sizes, or the\n"
        "script's get_input_schedule() yielding the model's inputs per step.\n\n"
    ) + options.examples(
        "graphtool shapes model.py                  # get_input_schedule()",
        "graphtool shapes model.py --sizes input_ids:1=17,33,64,128",
        "graphtool shapes model.py --sizes 'input_ids:1={17: 40, 33: 12}'",
        "graphtool shapes model.py --sizes input_ids:1=1..512 --steps 200",
        "graphtool shapes model.py --mark-dynamic input_ids:1",
        "graphtool shapes model.py --set cudagraph_capture_sizes=64,128,256",
        "graphtool shapes model.py --stance eager_on_recompile  # after step 1",
    ))
