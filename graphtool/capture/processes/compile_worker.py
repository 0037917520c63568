"""Compile one model for real, in a child process started by :func:`graphtool.capture.processes.compile_job.run_compile_job`.

The child sets ``TORCH_TRACE`` (and the caches, as the job says) before it imports torch, so torch writes its own
compilation metrics into a log the parent reads with :mod:`graphtool.capture.torch_trace`: ``graphtool compile``'s
phases and ``graphtool log``'s are the same numbers from the same code. What the child measures itself, with the
host clock around whole calls: an eager step, the first compiled call (the compile happens inside it), the
compiled step. A step is the model's call on its example inputs, and in training a backward from its outputs.

As it goes, the child appends JSON lines to the job's status file (the stage it enters, each fact it measured) and
writes graphtool's own marker artifact into the trace (:func:`graphtool.capture.compat.trace_marker`) between its
stages, so a child stopped by ``--timeout`` still leaves what finished, and the parent tells the whole compile's
records from the probe's. Nothing here imports torch before ``main`` has set the environment.
"""

from __future__ import annotations

import contextlib
import json
import os
import statistics
import sys
import time
from pathlib import Path

from graphtool.capture.processes.compile_job import STAGE_ARTIFACT, CompileJob


class _Status:
    def __init__(self, path: str):
        self.path = path

    def stage(self, name: str) -> None:
        self._write({"stage": name, "t": time.time()})

    def fact(self, **facts) -> None:
        self._write({"facts": facts})

    def _write(self, item: dict) -> None:
        with open(self.path, "a", encoding="utf-8") as f:
            f.write(json.dumps(item) + "\n")


def run(job: CompileJob) -> dict:
    """Run the job's stage; the result's measurements as a JSON-able dict."""
    from graphtool.capture import compat

    torch = compat.import_torch()
    _check_backend(compat, job.backend)
    status = _Status(job.status_path)
    status.stage("loading the model")
    from graphtool.capture.graph_breaks import quiet_torch_logs

    with quiet_torch_logs(not job.debug), contextlib.redirect_stdout(sys.stderr), _quiet_warnings():
        spec, device = _load(torch, job)
        training = _training(spec, job.inference)
        out = {"ok": True, "stage": job.stage, "torch_version": str(torch.__version__), "device": _device_name(torch, device),
               "training": training, "model": {"path": str(spec.path), "entry": spec.entry}}
        step = _Step(torch, spec, training, device)
        out["nested_compile_region"] = compat.nested_compile_region() is not None
        if job.stage == "regional":
            _regional(torch, job, spec, step, status, out)
        else:
            _whole(torch, job, spec, step, status, out)
    return out


def _check_backend(compat, backend: str) -> None:
    from graphtool.errors import UsageError

    known = compat.compile_backends()
    if backend != "inductor" and backend not in known:
        raise UsageError(f"--backend {backend!r} is not a torch.compile backend", hint=f"one of: {', '.join(sorted(set(known) | {'inductor'}))}")


@contextlib.contextmanager
def _quiet_warnings():
    import warnings

    with warnings.catch_warnings():
        # torch says once per process that caches off means PGO off: the job asked for exactly that
        warnings.filterwarnings("ignore", message=r".*force disabled by torch.compiler.config.force_disable_caches")
        yield


def _load(torch, job: CompileJob):
    from graphtool.capture.tensors import map_tensors
    from graphtool.capture.user.devices import parse_device
    from graphtool.capture.user.script import is_module, load_model

    spec = load_model(job.path, entry=job.entry)
    if job.device is not None:
        device = parse_device(job.device, choices="cpu or cuda")
    else:
        device = torch.device("cuda", torch.cuda.current_device()) if torch.cuda.is_available() else _spec_device(torch, spec)
    if is_module(spec.model):
        spec.model.to(device)

    def move(t):
        return t if t.device == device else t.detach().to(device).requires_grad_(t.requires_grad)

    spec.args, spec.kwargs = map_tensors(spec.args, move), map_tensors(spec.kwargs, move)
    return spec, device


def _spec_device(torch, spec):
    from graphtool.capture.tracer import model_device

    return torch.device(model_device(spec))


def _device_name(torch, device) -> str:
    return torch.cuda.get_device_name(device) if device.type == "cuda" else device.type


def _training(spec, inference: bool) -> bool:
    from graphtool.capture.tracer import wants_training

    return wants_training(spec, inference)


class _Step:
    """One step of the model: its call on the example inputs, and in training a backward from every output that
    needs grad; timed with the host clock (after a synchronize on a GPU)."""

    def __init__(self, torch, spec, training: bool, device):
        self.torch, self.spec, self.training, self.device = torch, spec, training, device
        from graphtool.capture.user.script import is_module

        self.params = list(spec.model.parameters()) if is_module(spec.model) else []
        self.last_samples: list[float] = []
        self.last_cpu = self.median_cpu = self.eager_cpu = 0.0

    def __call__(self, fn) -> float:
        """The step's wall seconds; its CPU seconds (this process and the compiler processes it waited for: a
        clock a busy machine barely moves) are left in ``last_cpu``."""
        from graphtool.capture.tracer import _run_backward

        for p in self.params:  # each step starts from no gradients, as zero_grad(set_to_none=True) leaves it
            p.grad = None
        self._sync()
        cpu, started = _cpu(), time.perf_counter()
        out = fn(*self.spec.args, **self.spec.kwargs)
        if self.training:
            _run_backward(self.torch, out)
        self._sync()
        wall = time.perf_counter() - started
        self.last_cpu = _cpu() - cpu
        return wall

    def _sync(self) -> None:
        if self.device.type == "cuda":
            self.torch.cuda.synchronize(self.device)

    def settle(self, fn, most: int = 10, budget: float = 5.0) -> int:
        """Untimed steps until the step time is steady (the last two within 25% of each other and within 1.5x of the
        fastest yet), at most ``most`` steps or ``budget`` seconds: the steps right after a compile are slower (on
        this CPU a per-block compiled decoder took 4.3, 0.98, 0.23 s, then 0.03-0.07 s a step)."""
        times: list[float] = []
        started = time.perf_counter()
        while len(times) < most and (time.perf_counter() - started < budget or len(times) < 2):
            times.append(self(fn))
            last = times[-1]
            if len(times) >= 2 and abs(last - times[-2]) <= 0.25 * max(times[-2], 1e-9) and last <= 1.5 * min(times):
                break
        return len(times)

    def median(self, fn, n: int) -> tuple[float, list[float]]:
        samples, cpus = [], []
        for _ in range(n):
            samples.append(self(fn))
            cpus.append(self.last_cpu)
        self.last_samples, self.median_cpu = samples, statistics.median(cpus)
        return statistics.median(samples), samples


def _cpu() -> float:
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


def _eager(spec, step: _Step, status: _Status, job: CompileJob, catcher=None) -> float:
    """The eager step: once with ``catcher``'s hooks (its first call warms eager up), then ``steps`` timed."""
    from graphtool.capture.user.script import model_call_error

    status.stage("running the model eagerly")
    try:
        with catcher if catcher is not None else contextlib.nullcontext():
            step(spec.model)
        step.settle(spec.model)
        median, samples = step.median(spec.model, max(1, job.steps))
    except Exception as exc:
        what = "the model's training step (its call, then a backward from its outputs) raised eagerly" if step.training \
            else "the model raised eagerly on its example inputs"
        raise model_call_error(spec, exc, what) from None
    step.eager_cpu = step.median_cpu
    status.fact(eager_step=median, eager_step_samples=samples, eager_step_cpu=step.median_cpu)
    return median


def _compile_first(torch, job: CompileJob, spec, step: _Step, status: _Status, model, what: str) -> dict:
    """The first call of ``model`` (already under torch.compile): its wall time, or the failure with torch's error
    at the user's line."""
    from graphtool.capture import compat

    status.stage(what)
    compat.trace_marker(STAGE_ARTIFACT, job.stage)
    try:
        first = step(model)
    except Exception as exc:
        return {"failure": _failure(exc)}
    status.fact(**{f"{job.stage}_first_call": first, f"{job.stage}_first_call_cpu": step.last_cpu})
    return {"first_call": first, "first_call_cpu": step.last_cpu, "eager_step_cpu": step.eager_cpu}


def _failure(exc: BaseException) -> dict:
    from graphtool.capture import compat
    from graphtool.capture.bench.modes import describe_error
    from graphtool.capture.user.boundary import exception_chain, full_traceback, nearest_user_frame, torch_stage

    site = nearest_user_frame(exc)
    return {"message": describe_error(exc), "stage": compat.compile_stage_of(exception_chain(exc)) or torch_stage(exc),
            "file": site[0] if site else None, "line": site[1] if site else None, "traceback": full_traceback(exc)}


class _Recorder:
    """A torch.compile backend in front of the user's own: it notes each graph dynamo hands over (its compile id,
    op nodes and module stacks) and compiles it with exactly what ``torch.compile(backend=, mode=)`` would."""

    def __init__(self, inner):
        self.inner = inner
        self.graphs: list[dict] = []

    def __call__(self, gm, example_inputs):
        from graphtool.capture import compat
        from graphtool.capture.compile_regions import module_stacks, op_nodes

        self.graphs.append({"compile_id": compat.current_compile_id(), "nodes": len(op_nodes(gm)), "modules": module_stacks(gm)})
        return self.inner(gm, example_inputs)


def _whole(torch, job: CompileJob, spec, step: _Step, status: _Status, out: dict) -> None:
    from graphtool.capture import compat
    from graphtool.capture.compile_regions import FirstCalls, candidate_groups, is_compiled_module
    from graphtool.capture.user.script import is_module

    module = spec.model if is_module(spec.model) else None
    groups = candidate_groups(module) if module is not None and job.stage == "whole" else []
    instances = {f: module.get_submodule(f) for g in groups for f in g.fqns}
    catcher = FirstCalls(instances) if instances and job.probe else None
    out["eager_step"] = _eager(spec, step, status, job, catcher)
    out["eager_step_samples"] = step.last_samples
    recorder = _Recorder(compat.user_backend(job.backend, job.mode))
    compiled = torch.compile(spec.model, backend=recorder)
    first = _compile_first(torch, job, spec, step, status, compiled, "compiling the whole model")
    out.update(first)
    out["graphs"] = recorder.graphs
    out["torch_totals"] = compat.compile_time_totals()
    if "failure" in first:
        return
    if job.stage == "whole" and job.steps:
        status.stage("timing the compiled step")
        out["warmup_steps"] = step.settle(compiled)  # a second call may still compile (a lazy backward, a recompile)
        out["compiled_step"], out["compiled_step_samples"] = step.median(compiled, job.steps)
        out["torch_totals"] = compat.compile_time_totals()
        status.fact(compiled_step=out["compiled_step"])
    if groups:
        out["blocks"] = _blocks(torch, groups, instances, catcher, status)
        out["compiled_modules"] = sorted(f for f, m in module.named_modules() if f and is_compiled_module(m))


def _blocks(torch, groups, instances, catcher, status: _Status) -> list[dict]:
    """Each candidate group: its instances' facts, and (with the probe) what dynamo made of each alone."""
    from graphtool.capture import compat
    from graphtool.capture.compile_regions import module_facts, probe_group

    found = []
    for g in groups:
        entry = {"class": g.cls, "fqns": list(g.fqns), "nested_in": g.nested_in,
                 "facts": {f: module_facts(instances[f]) for f in g.fqns},
                 "fsdp2": [f for f in g.fqns if compat.is_fsdp2_module(instances[f])]}
        if catcher is not None:
            entry["aliased"] = {f: catcher.aliased[f] for f in g.fqns if catcher.aliased.get(f)}
            if g.nested_in is None:
                status.stage(f"compiling each {g.cls} alone (dynamo only)")
                compat.trace_marker(STAGE_ARTIFACT, "probe")
                entry["probe"] = probe_group(torch, {f: instances[f] for f in g.fqns}, catcher.calls)
        found.append(entry)
    return found


def _regional(torch, job: CompileJob, spec, step: _Step, status: _Status, out: dict) -> None:
    from graphtool.capture import compat

    out["eager_step"] = _eager(spec, step, status, job)
    out["eager_step_samples"] = step.last_samples
    model = spec.model
    for fqn in job.blocks:
        block = model.get_submodule(fqn)
        # block.compile() as a user's loop would write it; the backend callable is what torch.compile builds
        # from the same backend and mode (the recorder is left out: a per-block compile has nothing to add)
        block.compile(backend=compat.user_backend(job.backend, job.mode))
    first = _compile_first(torch, job, spec, step, status, model, f"compiling {len(job.blocks)} blocks one by one")
    out.update(first)
    out["torch_totals"] = compat.compile_time_totals()
    if "failure" in first:
        return
    if job.steps:
        status.stage("timing the regionally compiled step")
        out["warmup_steps"] = step.settle(model)
        out["compiled_step"], out["compiled_step_samples"] = step.median(model, job.steps)
        out["torch_totals"] = compat.compile_time_totals()
        status.fact(compiled_step=out["compiled_step"])


def main(argv: list[str]) -> int:
    """Child-process entry point: set the environment, read the job, write the result (or the error) as JSON."""
    job_path, result_path = argv
    job = CompileJob.from_dict(json.loads(Path(job_path).read_text()))
    os.environ.update(job.environment())  # before torch is imported: TORCH_TRACE and the caches are read then
    from graphtool.capture.stack_room import call_with_stack_room
    from graphtool.errors import GraphtoolError

    try:
        result = call_with_stack_room(run, job)
    except GraphtoolError as err:
        result = {"ok": False, "error": err.message, "hint": err.hint, "detail": err.detail, "exit_code": err.exit_code}
    except Exception as exc:
        import traceback

        result = {"ok": False, "error": f"internal error in graphtool: {type(exc).__name__}: {exc}",
                  "detail": traceback.format_exc(), "exit_code": 3}
    tmp = result_path + ".tmp"
    Path(tmp).write_text(json.dumps(result, default=str))
    os.replace(tmp, result_path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
