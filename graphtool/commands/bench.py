"""``graphtool bench``: eager vs torch.compile vs CUDA-graph replay, each checked against eager, then timed.

Example::

    >>> res = bench("examples/mlp.py", iters=20, repeat=2)
    >>> [m.name for m in res.report.modes]
    ['eager', 'compile[default]']
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Optional

from graphtool.commands.progress import SILENT, Progress, quiet_stdout
from graphtool.commands.result import Result
from graphtool.commands.session import per_model
from graphtool.errors import UsageError
from graphtool.schema import stamped

if TYPE_CHECKING:
    from graphtool.analysis.bench_report import BenchReport


@dataclass(frozen=True, repr=False)
class BenchResult(Result):
    """The timings of every mode (a :class:`~graphtool.analysis.bench_report.BenchReport`) and their views."""

    command = "bench"

    report: BenchReport
    cuda_missing: bool  # --cudagraphs was asked for on a machine without CUDA: eager and compiled only

    def to_dict(self) -> dict:
        return stamped(self.command, self.report.to_dict())

    def summary(self) -> str:
        """Each mode's median and its speed-up over eager, or why it did not run.

        >>> from graphtool.analysis.bench_report import BenchReport, ModeReport
        >>> from graphtool.analysis.timing_stats import summarize
        >>> ok = lambda name, ms, up: ModeReport(name, "ok", None, summarize([ms]), up, 0.0, None, None)
        >>> r = BenchReport("m.py", "model", "cpu", "0", "2", {}, False, 1, 10, 3,
        ...                 (ok("eager", 2.0, 1.0), ok("compile[default]", 0.5, 4.0)), None)
        >>> BenchResult(r, False).summary()
        'eager 2 ms; compile[default] 0.5 ms (4.00x)'
        """
        parts = []
        for m in self.report.modes:
            if m.status == "ok" and m.stats:
                faster = f" ({m.speedup:.2f}x)" if m.speedup and m.name != "eager" else ""  # eager is the 1.00x
                parts.append(f"{m.name} {m.stats.median_ms:.4g} ms{faster}")
            else:
                parts.append(f"{m.name} {m.status}")
        return "; ".join(parts) or "no mode ran"

    def view(self):
        from graphtool.render.bench import bench_view

        return bench_view(self.report)

    def sections(self) -> list[str]:
        from graphtool.render.report import bench_section

        return [bench_section(self.report)]

    def _findings(self) -> str:
        return ""  # the page's section has the warnings and each mode's reason beside the table

    def diagnostics(self) -> str:
        """What makes the numbers hard to trust, and each mode that did not run as asked: one line each."""
        lines = [f"warning: {w}" for w in self.report.warnings()]
        lines += [f"{m.name}: {m.reason}" for m in self.report.modes if m.reason and m.status != "ok"]
        return "\n".join(lines)

    @property
    def title(self) -> str:
        return self.report.entry


bench = per_model("bench", first=True)


def run(session, *, cudagraphs: bool, compile_mode: str, backward: bool,
        warmup: int, iters: int, repeat: int, in_place: bool) -> BenchResult:
    """Time the model's modes side by side on the same inputs, on the session's device (default: CUDA when there is
    one); ``in_place``: where the script (or the caller) put the model, as ``trace --bench`` times it. What one
    iteration is follows every command's default, training (forward and backward when something requires grad; a
    whole training step as it is), unless the session's ``inference`` (the forward alone) or ``backward`` says; the
    report's ``timed`` and ``timed_why`` say which."""
    session.launch.check("bench", alone=not in_place)  # trace --ddp --bench times the model alone, on purpose
    if iters < 1 or repeat < 1 or warmup < 0:
        raise UsageError("--iters and --repeat must be 1 or more, --warmup 0 or more")
    if session.inference and backward:
        raise UsageError("--backward and --inference ask for opposite things", hint="drop one: training is the default")
    backward = False if session.inference else backward
    progress = session.progress
    progress.phase("importing torch...")
    with quiet_stdout():
        from graphtool.capture import compat

        torch = compat.import_torch()
        run_on = None if in_place else _run_device(torch, session.device, cudagraphs)
    spec = session.spec()
    _check_compile_mode(compat, compile_mode)
    verdict, blocked = _capture_verdict(session) if cudagraphs else (None, None)
    from graphtool.capture.bench.modes import cuda_device_of

    if run_on is None:
        cuda = cuda_device_of(spec)
        run_on = torch.device(cuda) if cuda is not None else torch.device("cpu")
    else:
        from graphtool.capture.user.script import is_module

        if is_module(spec.model):
            spec.model.to(run_on)
        spec = _inputs_to(spec, run_on)
    has_cuda = run_on.type == "cuda"
    results = run_bench_modes(spec, compile_mode=compile_mode, cudagraphs=cudagraphs and has_cuda, backward=backward,
                              warmup=warmup, iters=iters, repeat=repeat, blocked=blocked, progress=progress,
                              debug=session.debug)
    if cudagraphs and not has_cuda:  # every mode --cudagraphs asks for gets a row that says why it did not run
        from graphtool.capture.bench.modes import ModeResult

        results.append(ModeResult("cudagraph replay", "skipped", "no CUDA device is present"))
        if compile_mode != "reduce-overhead":
            results.append(ModeResult("compile[reduce-overhead]", "skipped",
                                      "no CUDA device is present: mode=\"reduce-overhead\" replays CUDA graphs, which need one"))
    from graphtool.analysis.bench_report import build_bench_report

    device_name = torch.cuda.get_device_name(run_on) if has_cuda else "cpu"
    report = build_bench_report(spec, device_name, results, backward=backward, warmup=warmup, iters=iters,
                                repeat=repeat, verdict=verdict)
    return BenchResult(report, cuda_missing=cudagraphs and not has_cuda)


def run_bench_modes(spec, *, compile_mode: str, cudagraphs: bool, backward: bool, warmup: int, iters: int,
                    repeat: int, blocked: Optional[str], progress: Progress = SILENT, debug: bool = False) -> list:
    """Check each mode against eager, then time it; progress counts timed iterations, and names the
    untimed steps between them (compiling, capturing) as phases. torch's logs show only with ``debug``."""
    from graphtool.capture.bench.modes import run_modes

    modes = 1 + (compile_mode not in (None, "none")) + 2 * cudagraphs
    total = modes * repeat * iters
    done = 0

    def advance(name: str, n: int) -> None:
        nonlocal done
        done += n
        progress.advance(done, total, f"timing {name}")

    with quiet_stdout():
        return run_modes(
            spec, compile_mode=compile_mode, cudagraphs=cudagraphs, backward=backward, warmup=warmup, iters=iters,
            repeat=repeat, capture_blocked=blocked, on_progress=advance, on_phase=progress.phase, quiet=not debug,
        )


def _run_device(torch, device: Optional[str], cudagraphs: bool):
    """The device bench runs on: ``--device``, else CUDA when present, else the CPU."""
    from graphtool.capture.user.devices import parse_device

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
    from graphtool.capture.bench.modes import COMPILE_MODES

    known = list(COMPILE_MODES) + compat.compile_backends()
    if mode != "none" and mode not in known:
        raise UsageError(f"--compile {mode!r} is neither a torch.compile mode nor a backend",
                         hint=f"one of: none, {', '.join(known)}")


def _capture_verdict(session) -> tuple[dict, Optional[str]]:
    """The cudagraphs backend's verdict (the session's), and the reasons (with lines) that stop a capture of eager code."""
    from graphtool.analysis.cudagraphs.verdict import eager_capture_blockers

    verdict = session.verdict("cudagraphs")[0].to_dict()
    blockers = eager_capture_blockers(verdict)
    blocked = "; ".join(
        f"{r['message']} ({r['source']['file']}:{r['source']['line']})" if r.get("source") else r["message"]
        for r in blockers
    ) or None
    return verdict, blocked


def _inputs_to(spec, device):
    from graphtool.capture.tensors import map_tensors

    def move(t):
        if t.device == device:
            return t
        return t.detach().to(device).requires_grad_(t.requires_grad)

    return replace(spec, args=map_tensors(spec.args, move), kwargs=map_tensors(spec.kwargs, move))
