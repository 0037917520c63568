"""``graphtool memory``: what training keeps for backward, eager beside compiled, per line, module or op."""

from __future__ import annotations

from typing import Optional

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
    app.command(
        "memory",
        short_help="What training keeps for backward, eager beside compiled.",
        help=(
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
        ),
    )(memory)


def memory(
    model: Optional[str] = options.ModelArg,
    entry: Optional[str] = options.EntryOpt,
    device: Optional[str] = options.DeviceOpt,
    backend: str = options.BackendOpt,
    by: str = typer.Option("line", "--by", help="Group saved activations per line, module or op."),
    depth: Optional[int] = typer.Option(
        None, "--depth", help="With --by module: module levels to keep (1 = the model's children; a list index counts with its list).",
    ),
    top: int = typer.Option(10, "--top", help="Rows per table (JSON and YAML list everything)."),
    dynamic: bool = typer.Option(
        False, "--dynamic",
        help="Trace the input sizes that differ in the script's dynamic_inputs or dynamic_dims (else the sequence of "
             "token ids, or the batch) as symbols: bytes become formulas.",
    ),
    schedule: bool = typer.Option(
        False, "--schedule",
        help="Measure at the largest step of the script's get_input_schedule() (the most input elements), and say what "
             "the CUDA graphs recorded at that size hold in cudagraph trees' pool.",
    ),
    fmt: str = options.FormatOpt,
    timeout: Optional[float] = options.TimeoutOpt,
    ddp: bool = options.DdpOpt,
    world_size: int = options.WorldSizeOpt,
    bucket_cap_mb: float = options.BucketCapOpt,
    find_unused: bool = options.FindUnusedOpt,
    fsdp2: bool = options.Fsdp2Opt,
    fit: Optional[str] = typer.Option(
        None, "--fit", metavar="SIZE|GPU",
        help="Predict the training step's peak and say whether it fits: a size (24GiB, 80GB; GiB 1024-based, GB "
             "1000-based) or a GPU name (H100, H200, A100-40GB, A100-80GB, L4, A10G, RTX4090, RTX3090, T4, V100-16GB, "
             "V100-32GB).",
    ),
    budgets: Optional[str] = typer.Option(
        None, "--budgets", metavar="[LIST]",
        help="Sweep torch's activation_memory_budget (alone: 1,0.8,0.6,0.4,0.2,0; or a list in 0..1 such as "
             "1,0.5,0.1): what its partitioner saves and recomputes, and the step's peak at each.",
    ),
) -> int:
    from graphtool.commands.memory import memory as run

    options.check_format(fmt)
    fsdp2_settings = options.fsdp2_options(fsdp2, ddp, world_size)
    ddp_settings = options.ddp_options(ddp, world_size, bucket_cap_mb, find_unused)
    with console.RichProgress() as progress, options.time_limit(timeout):
        results = run(model, entry=entry, device=device, backend=backend, by=by, depth=depth, top=top, dynamic=dynamic,
                      debug=options.debug_enabled(), progress=progress, ddp=ddp_settings,
                      fsdp2=fsdp2_settings, fit=fit, budgets=budgets, schedule=schedule)
    if fmt == "table":
        for r in results:
            console.print_view(r)
    else:
        console.emit_all([r.to_dict() for r in results], fmt)
    return 0
