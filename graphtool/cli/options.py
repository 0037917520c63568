"""Options several commands share, and the per-invocation ``--debug`` flag."""

from __future__ import annotations

from contextvars import ContextVar

import typer

from graphtool.commands.launch import launch_of
from graphtool.errors import UsageError

FORMATS = ("table", "json", "yaml")

ModelArg = typer.Argument(None, help="Model script (path.py or path.py:FACTORY). Default: the bundled example.", show_default=False)
EntryOpt = typer.Option(None, "--entry", help="Factory function returning (model, inputs[, kwargs]).")
DeviceOpt = typer.Option(None, "--device", help="Build the model and inputs under this device (e.g. meta, for models too big for memory).")
FormatOpt = typer.Option("table", "--format", "-f", help="table (rich, default), json or yaml: one document on stdout.")
InferenceOpt = typer.Option(False, "--inference", help="Trace the forward only (no backward graph).")
CheckOpt = typer.Option(False, "--check", help="Exit 1 when anything is found (for CI).")
BackendOpt = typer.Option(
    "inductor", "--backend",
    help="Whose graphs: the AOT stage of inductor (torch.compile's default), aot_eager or cudagraphs.",
)

#: the widest an example line may be: click indents help by 2 and wraps at the terminal's width (80 here)
EXAMPLE_WIDTH = 76


def examples(*lines: str) -> str:
    """A help paragraph of example commands that click prints as written: ``\\b`` stops its rewrapping,
    which at 80 columns broke an example in the middle of its comment. Keep each line within
    :data:`EXAMPLE_WIDTH`; a test checks every command's help at 80 columns.

    >>> print(examples("graphtool trace", "graphtool trace model.py"))
    \b
    Examples:
      graphtool trace
      graphtool trace model.py
    """
    return "\b\nExamples:\n" + "\n".join(f"  {line}" for line in lines)


TimeoutOpt = typer.Option(
    None, "--timeout", metavar="SECONDS",
    help="Stop with exit 2 after this many seconds, naming the line of the script that was running (default: no limit).",
)


def time_limit(seconds: float | None):
    """The ``--timeout`` of an in-process command: a context that stops the work past ``seconds``."""
    from graphtool.capture.user.deadline import deadline

    return deadline(seconds)


#: set once per invocation by graphtool.cli.main.run from --debug / GRAPHTOOL_DEBUG
DEBUG: ContextVar[bool] = ContextVar("graphtool_debug", default=False)


def debug_enabled() -> bool:
    return DEBUG.get()


def check_format(fmt: str) -> str:
    if fmt not in FORMATS:
        raise UsageError(f"--format {fmt!r} is not one of {', '.join(FORMATS)}")
    return fmt


DdpOpt = typer.Option(
    False, "--ddp",
    help="Run the model as DDP(torch.compile(model)) in torch's fake process group (no GPU): the graphs DDP's optimizer splits at gradient buckets.",
)
WorldSizeOpt = typer.Option(2, "--world-size", metavar="N", help="With --ddp or --fsdp2: the number of ranks the launch will use.")
Fsdp2Opt = typer.Option(
    False, "--fsdp2",
    help="Run the model under FSDP2 as rank 0 of a fake process group of --world-size ranks (no GPU): graphtool calls "
         "fully_shard on every module of each nn.ModuleList, then on the model, then torch.compile(model); a script's "
         "get_distributed_model(world_size) may return a model it sharded itself, and get_optimizer(model) the optimizer "
         "whose state is counted.",
)
BucketCapOpt = typer.Option(25.0, "--bucket-cap-mb", metavar="MB", help="With --ddp: DDP's bucket_cap_mb (DDP's default 25).")


def fsdp2_options(fsdp2: bool, ddp: bool, world_size: int) -> dict | None:
    """``--fsdp2``'s settings, checked before torch is imported; None without ``--fsdp2``."""
    if not fsdp2:
        return None
    settings = {"world_size": world_size}
    launch_of({"world_size": world_size} if ddp else None, settings)  # checked where every door checks them
    return settings


FindUnusedOpt = typer.Option(
    False, "--find-unused-parameters",
    help="With --ddp: DDP(..., find_unused_parameters=True), as the launch will wrap it (without it, a model with "
         "parameters that get no gradient fails on its second step: graphtool runs two and says so).",
)


def ddp_options(ddp: bool, world_size: int, bucket_cap_mb: float, find_unused: bool = False) -> dict | None:
    """``--ddp``'s settings for the commands, checked before torch is imported; None without ``--ddp``."""
    if find_unused and not ddp:
        raise UsageError("--find-unused-parameters is a DDP setting: add --ddp")
    if not ddp:
        return None
    settings = {"world_size": world_size, "bucket_cap_mb": bucket_cap_mb, "find_unused_parameters": find_unused}
    launch_of(settings, None)  # checked where every door checks them
    return settings
