"""Options and steps shared by the commands: loading with progress, output, --check."""

from __future__ import annotations

import contextlib
from contextvars import ContextVar
import sys
from pathlib import Path
from typing import Optional

import typer

from graphtool.errors import UsageError

FORMATS = ("table", "json", "yaml")

ModelArg = typer.Argument(None, help="Model script (path.py or path.py:FACTORY). Default: the bundled example.", show_default=False)
EntryOpt = typer.Option(None, "--entry", help="Factory function returning (model, inputs[, kwargs]).")
DeviceOpt = typer.Option(None, "--device", help="Build the model and inputs under this device (e.g. meta, for models too big for memory).")
FormatOpt = typer.Option("table", "--format", "-f", help="table (rich, default), json or yaml: one document on stdout.")
InferenceOpt = typer.Option(False, "--inference", help="Trace the forward only (no backward graph).")
CheckOpt = typer.Option(False, "--check", help="Exit 1 when anything is found (for CI).")


def bundled_example() -> Path:
    return Path(__file__).resolve().parents[1] / "bundled" / "example_model.py"


def targets(model: Optional[str], entry: Optional[str]) -> list[tuple[str, Optional[str]]]:
    """The models a command runs on: MODEL, else the config's models, else the bundled example."""
    if model:
        return [(model, entry)]
    from graphtool.config import find_config, load_config

    found = find_config()
    if found is not None:
        cfg = load_config(found)
        if cfg.models:
            return [(str(m.path), entry or m.entry) for m in cfg.models]
    return [(str(bundled_example()), entry)]


def emit_all(docs: list[dict], fmt: str) -> None:
    """One document on stdout: the report itself, or ``{"models": [...]}`` for several models."""
    emit(docs[0] if len(docs) == 1 else {"models": docs}, fmt)


def check_format(fmt: str) -> str:
    if fmt not in FORMATS:
        raise UsageError(f"--format {fmt!r} is not one of {', '.join(FORMATS)}")
    return fmt


def stderr_console():
    from rich.console import Console

    return Console(stderr=True)


def stdout_console():
    from rich.console import Console

    return Console()


#: set once per invocation by graphtool.cli.main.run from --debug / GRAPHTOOL_DEBUG
DEBUG: ContextVar[bool] = ContextVar("graphtool_debug", default=False)


def debug_enabled() -> bool:
    return DEBUG.get()


@contextlib.contextmanager
def _loading(model: Optional[str], entry: Optional[str], device: Optional[str]):
    """Import torch and load the script with progress on stderr; yields ``(spec, status)``.

    The user's own prints go to stderr meanwhile: stdout carries only graphtool's one document."""
    target = model or str(bundled_example())
    with stderr_console().status("importing torch...") as status, quiet_stdout():
        from graphtool.capture import compat

        compat.import_torch()
        compat.freeze_gc_after_import()
        from graphtool.capture.script import load_model

        status.update(f"loading {Path(target.split(':')[0]).name}...")
        yield load_model(target, entry=entry, device=device), status


def load_and_trace(model: Optional[str], entry: Optional[str], device: Optional[str], inference: bool, *, record_breaks: bool = True):
    """Load the script and trace it on its own device."""
    with _loading(model, entry, device) as (spec, status):
        from graphtool.capture.tracer import trace_model

        status.update("tracing with dynamo + AOT autograd...")
        return trace_model(
            spec,
            inference=inference,
            record_breaks=record_breaks,
            quiet=not debug_enabled(),
            on_region=lambda i: status.update(f"tracing region {i}..."),
        )


def quiet_stdout():
    """The user's own prints go to stderr: stdout carries only graphtool's output."""
    return contextlib.redirect_stdout(sys.stderr)


def emit(data: dict, fmt: str) -> None:
    from graphtool.render.documents import format_data

    sys.stdout.write(format_data(data, fmt))


def load_and_trace_standin(model: Optional[str], entry: Optional[str], device: Optional[str], inference: bool, *, backend: str = "inductor", dynamic: bool = False):
    """The accelerator view: trace on the model's GPU, or on meta standing for one."""
    with _loading(model, entry, device) as (spec, status):
        from graphtool.analysis.cudagraphs import keep_input_mutations_for
        from graphtool.capture.meta_standin import accelerator_of, to_meta
        from graphtool.capture.tracer import trace_model

        accel = accelerator_of(spec)
        if accel == "meta":
            status.update("moving the model to the meta device (the accelerator stand-in)...")
            spec = to_meta(spec)
        status.update("tracing on the accelerator stand-in..." if accel == "meta" else "tracing on the GPU...")
        capture = trace_model(
            spec,
            inference=inference,
            keep_inference_input_mutations=keep_input_mutations_for(backend),
            standin=accel == "meta",
            dynamic=dynamic,
            quiet=not debug_enabled(),
            on_region=lambda i: status.update(f"tracing region {i}..."),
        )
    if capture.stopped:
        stderr_console().print(f"note: {capture.stopped}", style="yellow", highlight=False, markup=False)
    return capture, accel


def model_header(capture) -> dict:
    return {
        "path": str(capture.spec.path),
        "entry": capture.spec.entry,
        "device": capture.device,
        "training": capture.training,
        "stopped": capture.stopped,
    }
