"""``graphtool shapes``: compiles, recompiles and CUDA-graph recordings over a loop whose shapes change."""

from __future__ import annotations

from typing import Optional

import typer

from graphtool.cli import console, options


def register(app: typer.Typer) -> None:
    app.command(
        "shapes",
        short_help="Recompiles and CUDA-graph recordings over a loop whose input shapes change.",
        help=(
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
        ),
    )(shapes)


def shapes(
    model: Optional[str] = options.ModelArg,
    entry: Optional[str] = options.EntryOpt,
    device: Optional[str] = options.DeviceOpt,
    inference: bool = options.InferenceOpt,
    sizes: list[str] = typer.Option(
        [], "--sizes", metavar="INPUT:DIM=SIZES",
        help="Sizes of one input dimension per step: 17,33,64 (in order), 17*40,33*12 or {17: 40, 33: 12} (a length "
             "histogram, shuffled), 1..512 (drawn per step, --steps of them); every input sharing its sizes follows; repeatable.",
    ),
    n_steps: Optional[int] = typer.Option(None, "--steps", metavar="N", help="Steps drawn from a range (default 100); caps a list."),
    max_steps: int = typer.Option(1000, "--max-steps", metavar="N", help="Read at most N steps of the schedule; says what it left out."),
    seed: int = typer.Option(0, "--seed", help="Seed for shuffled histograms and drawn ranges."),
    mark_dynamic: list[str] = typer.Option([], "--mark-dynamic", metavar="INPUT:DIM",
                                           help="torch._dynamo.mark_dynamic on every step's input; repeatable."),
    maybe_mark_dynamic: list[str] = typer.Option([], "--maybe-mark-dynamic", metavar="INPUT:DIM",
                                                 help="torch._dynamo.maybe_mark_dynamic on every step's input; repeatable."),
    dynamic: str = typer.Option("auto", "--dynamic", metavar="auto|true|false", help="torch.compile(dynamic=...): auto is torch's default (None)."),
    backend: str = typer.Option("inductor", "--backend", help='inductor (mode="reduce-overhead") or cudagraphs (backend="cudagraphs").'),
    settings: list[str] = typer.Option([], "--set", metavar="KEY=VALUE",
                                       help="Override a cudagraph setting (cudagraph_skip_dynamic_graphs, graph_partition, ...); repeatable."),
    stance: Optional[str] = typer.Option(None, "--stance", metavar="STANCE",
                                         help="torch.compiler.set_stance(STANCE) from step 2 on, as a loop sets it after its "
                                              "first compile: eager_on_recompile, fail_on_recompile, force_eager, default."),
    advise: bool = typer.Option(True, "--advice/--no-advice", help="Check padding to buckets and mark_dynamic by predicting again."),
    fmt: str = options.FormatOpt,
    check: bool = options.CheckOpt,
    timeout: Optional[float] = options.TimeoutOpt,
) -> int:
    from graphtool.commands.shapes import check_options
    from graphtool.commands.shapes import shapes as run

    options.check_format(fmt)
    opts = check_options(sizes=sizes, steps=n_steps, max_steps=max_steps, seed=seed, mark_dynamic=mark_dynamic,
                         maybe_mark_dynamic=maybe_mark_dynamic, dynamic=dynamic, settings=settings, inference=inference,
                         backend=backend, advise=advise, stance=stance)
    with console.RichProgress() as progress, options.time_limit(timeout):
        results = run(model, entry=entry, device=device, options=opts, debug=options.debug_enabled(), progress=progress)
    return console.show_models(results, fmt, check)
