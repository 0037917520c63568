"""``graphtool cudagraphs``: would CUDA graphs be applied, region by region, and if not, why."""

from __future__ import annotations

from typing import Optional

import typer

from graphtool.cli import console, options


def register(app: typer.Typer) -> None:
    app.command(
        "cudagraphs",
        short_help="Would CUDA graphs be applied, region by region; if not, why.",
        help=(
            "Would CUDA graphs be applied, region by region, and if not, why (torch's own checks,\n"
            "run on a stand-in trace: no GPU needed).\n\n"
        ) + options.examples(
            "graphtool cudagraphs model.py              # mode=\"reduce-overhead\"",
            "graphtool cudagraphs model.py --backend cudagraphs --check",
            "graphtool cudagraphs model.py --set graph_partition=false",
            "graphtool cudagraphs model.py --ddp --world-size 8    # each DDP split",
            "graphtool cudagraphs model.py --fsdp2 --world-size 8  # each block graph",
            "graphtool cudagraphs model.py --schedule   # over get_input_schedule()",
        ),
    )(cudagraphs)


def cudagraphs(
    model: Optional[str] = options.ModelArg,
    entry: Optional[str] = options.EntryOpt,
    device: Optional[str] = options.DeviceOpt,
    inference: bool = options.InferenceOpt,
    backend: str = typer.Option("inductor", "--backend", help='inductor (mode="reduce-overhead") or cudagraphs (backend="cudagraphs").'),
    dynamic: bool = typer.Option(
        False, "--dynamic",
        help="Also run a second input size (the script's dynamic_inputs or dynamic_dims, else token ids one longer, "
             "else batch + 1), as a model serving several sizes would.",
    ),
    settings: list[str] = typer.Option(
        [], "--set", metavar="KEY=VALUE",
        help="Override a setting read from the installed torch (graph_partition, cudagraph_trees, cudagraph_support_input_mutation, "
             "cudagraph_skip_dynamic_graphs, cudagraph_min_partition_size, cpp_wrapper, cudagraph_backend_support_input_mutation); repeatable.",
    ),
    n_steps: int = typer.Option(
        3, "--steps", metavar="N",
        help="Run the model's step N times on the stand-in, as a loop would (grads reset, inputs and buffers as the step "
             "left them): each step's compiles, recompiles and CUDA-graph recordings; N >= 1.",
    ),
    schedule: bool = typer.Option(
        False, "--schedule",
        help="Also predict the loop over the script's get_input_schedule() (as graphtool shapes does, from the same "
             "load): recompiles and CUDA graphs recorded per size, and what each recording holds in the pool.",
    ),
    fmt: str = options.FormatOpt,
    check: bool = options.CheckOpt,
    timeout: Optional[float] = options.TimeoutOpt,
    ddp: bool = options.DdpOpt,
    world_size: int = options.WorldSizeOpt,
    bucket_cap_mb: float = options.BucketCapOpt,
    find_unused: bool = options.FindUnusedOpt,
    fsdp2: bool = options.Fsdp2Opt,
) -> int:
    from graphtool.commands.cudagraphs import cudagraphs as run

    options.check_format(fmt)
    fsdp2_settings = options.fsdp2_options(fsdp2, ddp, world_size)
    ddp_settings = options.ddp_options(ddp, world_size, bucket_cap_mb, find_unused)
    with console.RichProgress() as progress, options.time_limit(timeout):
        results = run(model, entry=entry, device=device, inference=inference, backend=backend, dynamic=dynamic, settings=settings,
                      debug=options.debug_enabled(), progress=progress, steps=n_steps, ddp=ddp_settings,
                      fsdp2=fsdp2_settings, schedule=schedule)
    return console.show_models(results, fmt, check)
