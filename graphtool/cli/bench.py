"""``graphtool bench``: eager vs compiled vs CUDA-graph replay, checked and measured honestly."""

from __future__ import annotations

from typing import Optional

import typer

from graphtool.cli import common
from graphtool.errors import NoCudaDevice, UsageError


def register(app: typer.Typer) -> None:
    app.command(
        "bench",
        help=(
            "Time eager, torch.compile and (with --cudagraphs) graphtool's own CUDA-graph replay and\n"
            "mode=\"reduce-overhead\", side by side on the same inputs; every mode is checked against\n"
            "eager before it is timed.\n\n"
            "Examples:\n\n"
            "  graphtool bench model.py                            # eager vs torch.compile\n\n"
            "  graphtool bench model.py --cudagraphs --backward    # on a GPU\n\n"
            "  graphtool bench model.py --compile aot_eager --iters 50 --format json"
        ),
    )(bench)


def bench(
    model: Optional[str] = common.ModelArg,
    entry: Optional[str] = common.EntryOpt,
    cudagraphs: bool = typer.Option(False, "--cudagraphs", help="Also capture and replay a CUDA graph, and run mode=\"reduce-overhead\" (needs CUDA)."),
    compile_mode: str = typer.Option("default", "--compile", help="torch.compile mode (default, reduce-overhead, max-autotune...) or backend (aot_eager, inductor...); none to skip."),
    backward: bool = typer.Option(False, "--backward", help="Time the whole forward + backward step and check gradients too."),
    warmup: int = typer.Option(10, "--warmup", help="Untimed iterations before timing."),
    iters: int = typer.Option(100, "--iters", help="Iterations per timed repeat."),
    repeat: int = typer.Option(3, "--repeat", help="Timed repeats (median, min, max and spread are over these)."),
    device: Optional[str] = typer.Option(None, "--device", help="Where to run: cpu, cuda or cuda:N (the script is built under it). Default: cuda when a GPU is present, else cpu."),
    fmt: str = common.FormatOpt,
) -> int:
    common.check_format(fmt)
    if iters < 1 or repeat < 1 or warmup < 0:
        raise UsageError("--iters and --repeat must be 1 or more, --warmup 0 or more")
    target, ent = common.targets(model, entry)[0]
    err = common.stderr_console()
    with err.status("importing torch..."), common.quiet_stdout():
        from graphtool.capture import compat

        torch = compat.import_torch()
        run_on = _run_device(torch, device, cudagraphs)
        from graphtool.capture.script import load_model

        spec = load_model(target, entry=ent, device=device)
    _check_compile_mode(compat, compile_mode)
    has_cuda = run_on.type == "cuda"
    verdict, blocked = None, None
    if cudagraphs:
        from graphtool.analysis.cudagraphs import eager_capture_blockers

        verdict = _verdict(target, ent)
        blockers = eager_capture_blockers(verdict)
        if blockers:
            blocked = "; ".join(
                f"{r['message']} ({r['source']['file']}:{r['source']['line']})" if r.get("source") else r["message"] for r in blockers
            )
    if hasattr(spec.model, "to"):
        spec.model.to(run_on)
    spec = _inputs_to(torch, spec, run_on)
    results = _run(spec, compile_mode, cudagraphs and has_cuda, backward, warmup, iters, repeat, blocked)
    if cudagraphs and not has_cuda:
        from graphtool.capture.bench_modes import ModeResult

        results.append(ModeResult("cudagraph replay", "skipped", "no CUDA device is present"))
    from graphtool.analysis.bench_report import build_bench_report

    device_name = torch.cuda.get_device_name(run_on) if has_cuda else "cpu"
    report = build_bench_report(spec, device_name, results, backward=backward, warmup=warmup, iters=iters, repeat=repeat, verdict=verdict)
    if fmt == "table":
        from graphtool.render.bench import bench_view

        common.stdout_console().print(bench_view(report))
    else:
        common.emit(report.to_dict(), fmt)
    if cudagraphs and not has_cuda:
        raise NoCudaDevice(
            "no CUDA device is present: --cudagraphs needs one to capture and replay; eager and compiled were measured above",
            hint="run on a machine with a CUDA GPU, or drop --cudagraphs (graphtool cudagraphs predicts the verdict without one)",
        )
    return 0


def bench_report(target, ent, *, compile_mode="default", backward=False, warmup=10, iters=100, repeat=3):
    """Eager vs torch.compile with bench's defaults, for ``graphtool trace --bench``."""
    with common.quiet_stdout():
        from graphtool.capture import compat

        torch = compat.import_torch()
        from graphtool.capture.script import load_model

        spec = load_model(target, entry=ent)
    results = _run(spec, compile_mode, False, backward, warmup, iters, repeat, None)
    from graphtool.analysis.bench_report import build_bench_report
    from graphtool.capture.bench_modes import cuda_device_of

    cuda = cuda_device_of(spec)  # where the script put the model: trace --bench times it there
    device = torch.cuda.get_device_name(cuda) if cuda is not None else "cpu"
    return build_bench_report(spec, device, results, backward=backward, warmup=warmup, iters=iters, repeat=repeat)


def _run_device(torch, device: str | None, cudagraphs: bool):
    """The device bench runs on: ``--device``, else CUDA when present, else the CPU."""
    from graphtool.capture.devices import parse_device

    if device is None:
        return torch.device("cuda", torch.cuda.current_device()) if torch.cuda.is_available() else torch.device("cpu")
    dev = parse_device(device, choices="cpu or cuda", no_cuda_hint=(
        "drop --device to time on the CPU; graphtool cudagraphs predicts the CUDA-graph verdict without a GPU"))
    if dev.type not in ("cpu", "cuda"):
        raise UsageError(f"--device {device}: bench times real work, on cpu or cuda",
                         hint="the meta device has no data to time; graphtool cudagraphs predicts without a GPU")
    if dev.type == "cpu" and cudagraphs and torch.cuda.is_available():
        raise UsageError("--cudagraphs captures on a CUDA device, but --device cpu was asked for",
                         hint="drop --device cpu, or drop --cudagraphs")
    return dev


def _check_compile_mode(compat, mode: str) -> None:
    from graphtool.capture.bench_modes import COMPILE_MODES

    known = list(COMPILE_MODES) + compat.compile_backends()
    if mode != "none" and mode not in known:
        raise UsageError(f"--compile {mode!r} is neither a torch.compile mode nor a backend",
                         hint=f"one of: none, {', '.join(known)}")


def _verdict(target, ent) -> dict:
    from graphtool.analysis.cudagraphs import cudagraph_verdict

    capture, accel = common.load_and_trace_standin(target, ent, None, inference=False, backend="cudagraphs")
    return cudagraph_verdict(capture, backend="cudagraphs", predicted=accel == "meta").to_dict()


def _inputs_to(torch, spec, device):
    from dataclasses import replace

    from graphtool.capture.tensors import map_tensors

    def move(t):
        if t.device == device:
            return t
        return t.detach().to(device).requires_grad_(t.requires_grad)

    return replace(spec, args=map_tensors(spec.args, move), kwargs=map_tensors(spec.kwargs, move))


def _run(spec, compile_mode, cudagraphs, backward, warmup, iters, repeat, blocked):
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    from graphtool.capture.bench_modes import run_modes

    modes = 1 + (compile_mode not in (None, "none")) + 2 * cudagraphs
    total = modes * repeat * iters
    with Progress(TextColumn("{task.description}"), BarColumn(), TextColumn("{task.completed}/{task.total}"),
                  TimeElapsedColumn(), console=common.stderr_console(), transient=True) as progress, common.quiet_stdout():
        task = progress.add_task("benchmarking", total=total)
        return run_modes(
            spec, compile_mode=compile_mode, cudagraphs=cudagraphs, backward=backward, warmup=warmup, iters=iters,
            repeat=repeat, capture_blocked=blocked,
            on_progress=lambda name, n: progress.update(task, advance=n, description=f"timing {name}"),
        )
