"""``graphtool shapes``: what torch.compile does over a loop whose input shapes change, before the run.

Example (``shapes("tests/fixtures/shapes/cnn_last_batch.py")`` predicts 2 graphs and 6 CUDA graphs recorded;
tests/analysis/test_shapes_gpu_agreement.py checks it against an H200's and an H100's rows)::

    >>> opts = check_options(sizes=["input_ids:1=17,33"], dynamic="false")
    >>> opts.rules[0].listed, opts.compile_dynamic
    ((17, 33), False)
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence
from typing import Any, Optional

from graphtool.commands.progress import quiet_stdout
from graphtool.commands.result import ModelResult, model_header
from graphtool.commands.session import per_model


@dataclasses.dataclass(frozen=True)
class ShapeOptions:
    """The command's settings, checked once at the door (before torch is imported)."""

    rules: tuple = ()  # schedule.SizeRule per --sizes
    steps: Optional[int] = None  # how many a drawn range (1..512) gives, or a cap on a list's
    max_steps: int = 1000
    seed: int = 0
    marks: tuple = ()  # (name, dim): mark_dynamic on every step's input
    maybe_marks: tuple = ()  # (name, dim): maybe_mark_dynamic
    compile_dynamic: Optional[bool] = None  # torch.compile(dynamic=...)
    overrides: Any = None  # cudagraph settings (--set)
    inference: bool = False
    backend: str = "inductor"
    advise: bool = True
    stance: Optional[str] = None  # torch.compiler.set_stance from step 2 on


#: the stances ``--stance`` takes (torch.compiler.set_stance's)
STANCES = ("default", "eager_on_recompile", "fail_on_recompile", "force_eager")


def check_options(*, sizes: Sequence[str] = (), steps: Optional[int] = None, max_steps: int = 1000, seed: int = 0,
                  mark_dynamic: Sequence[str] = (), maybe_mark_dynamic: Sequence[str] = (), dynamic: Optional[str] = None,
                  settings: Sequence[str] = (), inference: bool = False, backend: str = "inductor",
                  advise: bool = True, stance: Optional[str] = None) -> ShapeOptions:
    """Every flag read and checked: a mistake is a usage error (exit 2) that names the flag."""
    from graphtool.analysis.cudagraphs.verdict import check_cudagraph_backend, parse_settings
    from graphtool.capture.schedule import parse_marks, parse_sizes
    from graphtool.errors import UsageError

    check_cudagraph_backend(backend)
    if backend not in ("inductor", "cudagraphs"):
        raise UsageError(f"--backend {backend!r}: shapes predicts CUDA graphs under inductor (mode=\"reduce-overhead\") "
                         "or backend=\"cudagraphs\"", hint="--backend inductor or --backend cudagraphs")
    for flag, value, least in (("--max-steps", max_steps, 1), ("--steps", steps, 1)):
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < least):
            raise UsageError(f"{flag} {value!r}: a whole number >= {least}")
    modes = {None: None, "auto": None, "none": None, "true": True, "false": False}
    key = dynamic.lower() if isinstance(dynamic, str) else dynamic
    if key not in modes:
        raise UsageError(f"--dynamic {dynamic!r}: one of auto, true, false",
                         hint="auto is torch.compile's default (a size that changes becomes symbolic); true/false are dynamic=True/False")
    if stance is not None and stance not in STANCES:
        raise UsageError(f"--stance {stance!r}: one of {', '.join(STANCES)}",
                         hint="eager_on_recompile: after the first compile, a size not compiled yet runs eagerly")
    return ShapeOptions(rules=tuple(parse_sizes(s) for s in sizes), steps=steps, max_steps=max_steps, seed=seed,
                        marks=tuple(parse_marks(mark_dynamic)), maybe_marks=tuple(parse_marks(maybe_mark_dynamic)),
                        compile_dynamic=modes[key], overrides=parse_settings(settings), inference=inference, backend=backend,
                        advise=advise, stance=stance)


class ShapesResult(ModelResult):
    """One model's :class:`~graphtool.analysis.shapes.ShapeReport` over its shape schedule."""

    command = "shapes"
    key = "shapes"

    def summary(self) -> str:
        return self.report.summary()

    def body(self):
        from graphtool.render.shapes import shapes_view

        return shapes_view(self.report)

    def sections(self) -> list[str]:
        from graphtool.render.report import shapes_section

        return [shapes_section(self.report)]

    def _findings(self) -> str:
        return ""  # the page's section has every step, the loud line and the advice


shapes = per_model("shapes")


def run(session, *, schedule: Optional[Iterable], **flags) -> ShapesResult:
    """One :class:`ShapesResult` (a :class:`~graphtool.analysis.shapes.ShapeReport`); ``found`` when the frame passes
    ``recompile_limit``, the loop fails, or a graph is recorded for more sizes than torch warns about.

    The schedule is, in order: ``schedule`` (an iterable of the model's inputs per step, as the script's
    ``get_input_schedule()`` yields them), ``sizes`` (``--sizes``), the script's ``get_input_schedule()``; ``flags``
    are the table's other shapes options, as :func:`check_options` takes them."""
    session.launch.check("shapes", alone=True)
    opts = check_options(inference=session.inference, **flags)
    report, header = _one_model(session, schedule, opts)
    return ShapesResult(header, report, bool(report.limit_step or report.failed or report.warnings))


def _one_model(session, given, opts: ShapeOptions):
    from graphtool.analysis.shapes import shape_report
    from graphtool.capture.schedule import settings_in_effect

    spec, accel = _load_standin(session)
    schedule = _schedule(spec, given, opts, from_object=session.is_object)
    asked = opts.inference
    if schedule.grad_off:  # the loop calls the model under torch.no_grad(): no backward, as trace follows the grad mode
        opts = dataclasses.replace(opts, inference=True)
    standin = _standin_schedule(schedule, spec, opts)
    settings = settings_in_effect()  # after the script ran: its own torch._dynamo settings count
    settings.update(opts.overrides or {})  # --set, as torch would have them
    if opts.stance is not None:
        settings["stance"] = opts.stance
    capture, verdict = _predict(session, spec, standin, opts)
    from graphtool.analysis.shapes import scalar_advice
    from graphtool.capture.schedule import symbolic_dims, varying_values

    report = shape_report(capture, verdict, labels=schedule.labels, source=schedule.source, settings=settings,
                          backend=opts.backend, symbolic=symbolic_dims(capture), left_out=schedule.left_out,
                          asked_inference=asked, grad_modes=schedule.grad_modes, values=varying_values(spec, schedule.steps))
    if opts.advise:
        report = dataclasses.replace(report, advice=tuple(_advice(session, spec, schedule, report, opts))
                                     + tuple(scalar_advice(report)))
    return report, model_header(capture)


def _load_standin(session):
    """The stand-in's spec and accelerator; a caller's model object (``graphtool.shapes(model, ...)``) as a meta
    copy, as a script's is, the object itself left where it is."""
    spec, accel = session.standin_spec()
    return session.on_standin(spec, accel), accel


def _schedule(spec, given, opts: ShapeOptions, from_object: bool = False):
    from graphtool.capture.schedule import Schedule, _normalize, schedule_from_sizes, script_schedule, varying_labels
    from graphtool.errors import UsageError

    if given is not None:
        from graphtool.capture.schedule import read_steps

        items, grad = read_steps(given, opts.max_steps + 1)
        steps = [_normalize(spec, item, k + 1, "the schedule") for k, item in enumerate(items[: opts.max_steps])]
        if not steps:
            raise UsageError("the schedule is empty", hint="pass the model's inputs for each step")
        left = (f"the schedule goes on past max_steps {opts.max_steps}: later steps were not predicted"
                if len(items) > opts.max_steps else None)
        return Schedule(steps, "the schedule passed in", varying_labels(spec, steps), left, grad_modes=grad[: len(steps)])
    if opts.rules:
        return schedule_from_sizes(spec, list(opts.rules), steps=opts.steps, max_steps=opts.max_steps, seed=opts.seed)
    found = script_schedule(spec, max_steps=opts.max_steps)
    if found is None and from_object:  # a model object (graphtool.shapes(model, ...)): no script to read one from
        raise UsageError(f"{spec.entry}: no shape schedule: neither schedule= nor sizes= was given",
                         hint="pass the model's inputs for each step (schedule=[(x1,), (x2,)]), or sizes=['NAME:DIM=17,33,64'] "
                              "to vary one dimension of the example inputs")
    if found is None:
        raise UsageError(f"{spec.path}: no shape schedule: the script has no get_input_schedule() and no --sizes was given",
                         hint="--sizes input_ids:1=17,33,64,128 (one size per step), or define get_input_schedule() "
                              "yielding the model's inputs for each step")
    if opts.steps is not None and opts.steps < len(found.steps):
        found = dataclasses.replace(found, steps=found.steps[: opts.steps], labels=found.labels[: opts.steps])
    return found


def _standin_schedule(schedule, spec, opts: ShapeOptions, marks=None):
    from graphtool.capture.schedule import mark_inputs, to_standin

    standin = to_standin(schedule)
    if marks or opts.marks:
        mark_inputs(standin, spec, list(marks or opts.marks))
    if opts.maybe_marks:
        mark_inputs(standin, spec, list(opts.maybe_marks), maybe=True)
    return standin


def _predict(session, spec, standin, opts: ShapeOptions, what: str = ""):
    """Trace the stand-in over ``standin`` (a schedule on meta): the capture and its CUDA-graph verdict."""
    from graphtool.analysis.cudagraphs.verdict import cudagraph_verdict

    progress = session.progress
    total = len(standin.steps)
    stance = _StanceFromStep2(opts.stance)

    def on_step(step, steps):
        stance.at(step)
        progress.advance(step, steps, f"predicting{what}: step")

    standin.on_step = on_step
    if opts.stance == "force_eager":  # no step takes the compiled code again, a settled signature's neither
        standin.signature = None
    first_args, first_kwargs = standin.steps[0]
    spec = dataclasses.replace(spec, args=first_args, kwargs=first_kwargs)
    progress.phase(f"tracing{what} step 1 of {total} on the accelerator stand-in...")
    with quiet_stdout(), stance:
        capture = session.trace_spec(spec, inference=opts.inference, backend=opts.backend, standin=True,
                                     schedule=standin if total > 1 else None, steps=total,
                                     compile_dynamic=opts.compile_dynamic)
    if capture.stopped:
        progress.note(capture.stopped)
    return capture, cudagraph_verdict(capture, backend=opts.backend, predicted=True, settings=opts.overrides)


class _StanceFromStep2:
    """``torch.compiler.set_stance(stance)`` entered as step 2 starts, the caller's stance put back on the way out."""

    def __init__(self, stance: Optional[str]):
        self.stance, self.before = stance, None

    def __enter__(self):
        return self

    def at(self, step: int) -> None:
        if self.stance is not None and step == 2 and self.before is None:
            import torch

            from graphtool.capture import compat

            self.before = compat.compiler_stance()
            torch.compiler.set_stance(self.stance)

    def __exit__(self, *exc):
        if self.before is not None:
            import torch

            torch.compiler.set_stance(self.before)
        return False


def _advice(session, spec, schedule, report, opts: ShapeOptions) -> list:
    """Padding to buckets and marking the varying dimension dynamic, each checked by predicting again."""
    from graphtool.analysis.shapes import Advice, choose_bucket, padding_waste, shape_report
    from graphtool.capture.schedule import padded, symbolic_dims
    from graphtool.text import count

    varying: dict[str, int] = {}
    for label in schedule.labels:
        for key in label:
            name, _, dim = key.rpartition(":")
            varying.setdefault(name, int(dim))
    if not varying:
        return []
    out = []

    def again(changed, what, marks=None, options=None):
        used = options or opts
        fresh, _ = _load_standin(session)
        standin = _standin_schedule(changed, fresh, used, marks=marks)
        capture, verdict = _predict(session, fresh, standin, used, what)
        settings = {**report.settings, **(used.overrides or {})}
        return shape_report(capture, verdict, labels=changed.labels, source=changed.source, settings=settings,
                            backend=used.backend, symbolic=symbolic_dims(capture))

    first = next(iter(varying))
    key = f"{first}:{varying[first]}"
    values = [label[key] for label in schedule.labels if key in label]
    bucket = choose_bucket(values)
    if bucket is not None and (report.recordings or report.limit_step or report.recompiles > 1 or report.warnings):
        checked = again(padded(schedule, spec, varying, bucket), f" (padded to {bucket})")
        waste = padding_waste(values, bucket)
        better = checked.graphed_steps > report.graphed_steps or checked.graphs_compiled < report.graphs_compiled or (
            report.limit_step and not checked.limit_step)
        out += [] if not better else [Advice("pad", (
            f"pad {key} up to a multiple of {bucket}: {checked.distinct_sizes} sizes instead of {report.distinct_sizes}, "
            f"{count(checked.graphs_compiled, 'graph')} compiled, {count(checked.recordings, 'CUDA graph')} recorded, "
            f"{checked.graphed_steps} of {checked.steps} steps run CUDA graphs (now {report.graphed_steps}), "
            f"{waste:.0%} padding"), _checked(checked, padding_waste=round(waste, 4), bucket=bucket))]
    if report.graphs_compiled > 1 and not opts.marks and opts.compile_dynamic is not True:
        marks = [(name, dim) for name, dim in varying.items()]
        checked = again(schedule, " (mark_dynamic)", marks=marks)
        call = " and ".join(f"torch._dynamo.mark_dynamic({n}, {d})" for n, d in marks)
        if checked.graphs_compiled >= report.graphs_compiled:
            return out
        out.append(Advice("mark_dynamic", (
            f"{call} on every batch: {count(checked.graphs_compiled, 'graph')} compiled instead of {report.graphs_compiled}, "
            f"{count(checked.recompiles, 'recompile')}, {count(checked.recordings, 'CUDA graph')} recorded"
            + (", no eager fallback" if report.limit_step and not checked.limit_step else "")),
            _checked(checked, marks=[f"{n}:{d}" for n, d in marks])))
    out += _capture_sizes_advice(report, schedule, opts, varying, values, again)
    return out


def _capture_sizes_advice(report, schedule, opts: ShapeOptions, varying: dict, values: list[int], again) -> list:
    """CUDA-graph only the most frequent sizes (``triton.cudagraph_capture_sizes``, the dimension marked dynamic so
    one graph serves every size): fewer recordings, and the pool holds only theirs; checked by predicting again."""
    from collections import Counter

    from graphtool.analysis.shapes import Advice
    from graphtool.text import count

    if len(varying) != 1 or opts.backend != "inductor" or report.recordings <= 4 or "cudagraph_capture_sizes" in (
            opts.overrides or {}):
        return []
    listed = tuple(sorted(size for size, _ in Counter(values).most_common(4)))
    marks = [(name, dim) for name, dim in varying.items()]
    options = dataclasses.replace(opts, overrides={**(opts.overrides or {}), "cudagraph_capture_sizes": listed})
    checked = again(schedule, " (capture sizes)", marks=marks, options=options)
    if checked.recordings >= report.recordings or checked.limit_step:
        return []
    name, dim = marks[0]
    peak = checked.pool_peak
    from graphtool.analysis.memory.saved import format_bytes

    return [Advice("capture_sizes", (
        f"torch._dynamo.mark_dynamic({name}, {dim}) and torch._inductor.config.triton.cudagraph_capture_sizes = "
        f"{listed} (the 4 most frequent sizes): {count(checked.recordings, 'CUDA graph')} recorded instead of "
        f"{report.recordings}, {checked.graphed_steps} of {checked.steps} steps run CUDA graphs (now {report.graphed_steps}), "
        f"the others compiled without them"
        + (f"; the pool holds up to {format_bytes(peak[0])} of recorded outputs" if peak else "")),
        _checked(checked, capture_sizes=list(listed), marks=[f"{name}:{dim}"]))]


def _checked(r, **extra) -> dict:
    return {"distinct_sizes": r.distinct_sizes, "graphs_compiled": r.graphs_compiled, "recompiles": r.recompiles,
            "limit_step": r.limit_step, "functions_recorded": r.functions_recorded, "recordings": r.recordings,
            "graphed_steps": r.graphed_steps, **extra}
