"""Trace a model the way torch.compile does: dynamo, then AOT autograd inside a backend.

The backend is built like torch's own cudagraphs backend (``aot_autograd(fw_compiler=...,
bw_compiler=...)``) with compilers that keep each GraphModule and run it unchanged. Every region
dynamo captures (several when the model has graph breaks) becomes one :class:`Region`, in the order
torch compiled them, with its forward, its backward (in training) and AOT's ViewAndMutationMeta.

Example::

    >>> from graphtool.capture.user.script import load_model
    >>> cap = trace_model(load_model("examples/mlp.py"))                  # inductor's AOT stage
    >>> [len(r.forward.graph.nodes) for r in cap.regions]
    [11]
    >>> [len(r.forward.graph.nodes) for r in trace_model(load_model("examples/mlp.py"), backend="cudagraphs").regions]
    [12]
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from graphtool.capture import compat
from graphtool.capture.aot_records import InputRecord, InputRef, OutputRecord, decode_forward
from graphtool.capture.collector import young_generations_only
from graphtool.capture.dynamic_inputs import run_variant
from graphtool.capture.graph_breaks import BreakRecorder, GraphBreak, quiet_torch_logs
from graphtool.capture.standin.host_values import HostValues
from graphtool.capture.steady_state import CallLogger, run_steps, value_guards_now
from graphtool.capture.tensors import iter_tensors
from graphtool.capture.train_step import StepWatch, optimizer_of_step, optimizer_state_names, script_parameter_names
from graphtool.capture.user.boundary import (
    exception_chain,
    full_traceback,
    graphtool_frame,
    graphtool_frames,
    innermost_user_call,
    nearest_user_frame,
    torch_stage,
)
from graphtool.capture.user.input_names import argument_names, named_state, source_kind_and_name
from graphtool.capture.user.script import ModelSpec, model_call_error
from graphtool.errors import GraphtoolBug, GraphtoolError, TraceFailed


@dataclass
class Region:
    """One compiled region: dynamo's graph plus AOT's forward and backward."""

    index: int
    inputs: list[InputRef]
    forward: Any = None
    backward: Any = None
    fw_metadata: Any = None  # AOT's ViewAndMutationMeta, for compat-level checks; analyses read the records below
    forward_inputs: tuple[InputRecord, ...] = ()
    forward_outputs: tuple[OutputRecord, ...] = ()
    num_aot_inputs: int = 0
    inference: bool = False
    example_inputs: list = field(default_factory=list)
    aot_input_types: list = field(default_factory=list)
    cudagraph_annotation: Any = None  # (fwd, bwd) from torch._dynamo.override_cudagraphs, or None
    step: int = 1  # the step of the loop in which dynamo compiled it (2+: a recompile)
    # dynamo input index -> the stack trace of the last in-place op on it in dynamo's graph: the user's line of a
    # mutation whose new value AOT takes straight from another input (copy_(x)), which carries none
    input_writes: dict[int, str] = field(default_factory=dict)
    # the tensors dynamo's graph holds as attributes, lifted by AOT as inputs: a compiled optimizer's parameters
    # and state (``self___state_..._exp_avg``), by attribute name
    attributes: dict[str, InputRef] = field(default_factory=dict)
    # the backward graph AOT's partitioner made for this region, whether or not a backward compiler was handed it
    partitioned_backward: Any = field(default=None, repr=False)
    # the user's line that called into this region's frame (a one-frame stack trace): an optimizer's step, whose
    # own lines are all torch's, is placed at the user's ``opt.step()``
    called_from: str | None = None
    # Python numbers dynamo compiled into this region's graph as constants, guarded on their values
    # (steady_state.ValueGuard): a loop whose value changes compiles again
    value_guards: tuple = ()


@dataclass
class Capture:
    spec: ModelSpec
    regions: list[Region]
    training: bool
    device: str
    breaks: list[GraphBreak]
    outputs: Any = None
    metadata_changes: dict[str, str] = field(default_factory=dict)
    stopped: str | None = None  # why a stand-in trace ended early, with the user's line
    backend: str = "inductor"  # whose AOT stage produced the graphs
    regions_compiled: int | None = None  # regions torch compiles, when a stand-in trace judged fewer
    no_graph: str | None = None  # torch.compile captured no graph at all: the cause graphtool can see
    skipped_frames: list = field(default_factory=list)  # SkippedFrame: frames dynamo gave up on (run eagerly)
    no_backward: str | None = None  # training, yet the output holds nothing to differentiate: why no backward graph
    steps: Any = None  # steady_state.StepLog: every graph call and recompile over the loop's steps
    # as the user set them, apart from ``training`` (whether graphtool runs a backward): the model's own
    # ``.training`` flag (None for a function, which has none) and the grad mode its forward was called in
    module_training: bool | None = None
    grad_enabled: bool = True
    # the model's call is a training step that runs its own backward (and optimizer), or an optimizer's
    # step alone: graphtool ran no backward of its own (train_step.OwnStep)
    own_step: Any = None
    # dynamo's own counters for the traced call (compat.counters_since): calls_captured, fallbacks_to_eager, ...
    counters: dict | None = None
    # a trace of several steps: the fields above as they stood when its first step ended (what a one-step trace
    # finds), read through first_step()
    first: dict | None = None

    @property
    def regions_judged(self) -> int:
        return len(self.regions)

    def first_step(self) -> Capture:
        """This capture as its first step left it: the regions, breaks, skipped frames, metadata changes, counters
        and no-graph cause a trace of that one step finds (a recompile at a later step left out), the step log kept.

        >>> c = Capture(None, ["r1", "r2"], True, "cuda", [], first={"regions": ["r1"], "breaks": []})
        >>> c.first_step().regions, c.first_step().first_step().regions
        (['r1'], ['r1'])
        """
        if not self.first:
            return self
        later = len(self.regions) - len(self.first["regions"])
        return dataclasses.replace(self, **self.first, first=None, regions_compiled=None if self.regions_compiled is None
                                   else self.regions_compiled - later)


def wants_training(spec: ModelSpec, inference: bool) -> bool:
    """Training when any parameter or input requires grad, unless ``--inference``."""
    if inference:
        return False
    params, _ = named_state(spec.model)  # a function's global modules count too
    if any(p.requires_grad for _, p in params):
        return True
    return any(t.requires_grad for t in iter_tensors((spec.args, spec.kwargs)))


def model_device(spec: ModelSpec) -> str:
    """The model's main device: its parameters', else its inputs'."""
    tensors = [p for _, p in named_state(spec.model)[0]]
    tensors = tensors or list(iter_tensors((spec.args, spec.kwargs)))
    return str(tensors[0].device.type) if tensors else "cpu"


class KeepingBackend:
    """A torch.compile backend: ``backend``'s own AOT stage with compilers that keep every graph and run it unchanged.

    Each call (one per region dynamo compiles) appends a :class:`Region`; the compilers fill in its
    forward (with the decoded input and output records), backward and inference graphs, exactly as
    that backend's AOT stage produces them (its decompositions, partitioner and input-mutation
    handling), without its code generation."""

    def __init__(self, names: dict, *, backend: str = "inductor", standin: bool,
                 on_region: Callable[[int], None] | None = None, placeholder_names: dict | None = None,
                 more_names: Callable[[], dict] | None = None):
        self.names = names
        self.more_names = more_names  # names of tensors made after the trace began (an optimizer's lazy state)
        self.placeholder_names = placeholder_names if placeholder_names is not None else {}
        self.backend = backend
        self.standin = standin
        self.on_region = on_region
        self.regions: list[Region] = []
        self.calls = CallLogger()
        self.failed: tuple[Region, Any] | None = None  # the region whose compile raised, and AOT's metadata of it

    def __call__(self, gm, example_inputs):
        if self.more_names is not None:
            for tid, name in self.more_names().items():
                self.names.setdefault(tid, name)
        region = Region(
            index=len(self.regions),
            inputs=[_classify(t, node, self.names, self.placeholder_names) for t, node in zip(example_inputs, _placeholders(gm))],
            example_inputs=list(example_inputs),
            cudagraph_annotation=compat.cudagraph_annotation(gm),
            step=self.calls.step,
            input_writes=_in_place_writes(gm),
            called_from=innermost_user_call(),
            attributes=_attribute_refs(gm, self.names),
            value_guards=value_guards_now(len(self.regions)),
        )
        self.regions.append(region)
        if self.on_region:
            self.on_region(region.index)
        parts: list = []
        # compiled autograd (the script's torch._dynamo.config.compiled_autograd) traces each backward itself: only
        # then is the partitioner's backward kept from the partition (a copy per region costs time)
        record = contextlib.nullcontext() if not _compiled_autograd_on() else compat.recording_partitions(parts)

        def keep(kind, aot_gm, aot_inputs):
            if kind == "forward" and parts and region.partitioned_backward is None:
                # the backward as AOT logged it, before anything compiles it (compiled autograd never hands it to
                # a backward compiler)
                region.partitioned_backward = compat.copy_graph_module(parts[-1][1])
            return self._keep(region, kind, aot_gm, aot_inputs)

        # graphs that run on meta (the stand-in, or a model built with --device meta) lose whole
        # subgraphs to inductor's constant folding: the stage is told so
        on_meta = self.standin or any(getattr(getattr(t, "device", None), "type", None) == "meta" for t in example_inputs)
        collected: list = []
        try:
            with compat.collecting_fw_metadata(collected), record:
                return compat.run_aot_stage(self.backend, gm, list(example_inputs), keep=keep, standin=on_meta)
        except BaseException:
            # what AOT had computed of the failing region before the failure: its forward's mutations
            self.failed = (region, collected[-1] if collected else None)
            # the backend failed (AOT tracing a custom op's backward that reads .tolist(), say): dynamo runs the
            # frame eagerly ("Backend compiler exception ... Adding a graph break") and compiles its callees, and
            # counts no graph for it (unique_graphs moves only once a compile returns): no region either
            self.regions.remove(region)
            raise

    def _keep(self, region: Region, kind: str, aot_gm, aot_inputs):
        if kind in ("forward", "inference"):
            region.inference = kind == "inference"
            region.forward = aot_gm
            region.fw_metadata = compat.copy_fw_metadata()
            region.forward_inputs, region.forward_outputs = decode_forward(aot_gm, region.fw_metadata, region.inputs,
                                                                           region.attributes)
            region.num_aot_inputs = len(aot_inputs)
            region.aot_input_types = [compat.cudagraph_input_type(x) for x in aot_inputs]
        elif kind == "backward":
            region.backward = aot_gm
        return self.calls.wrap(region.index, "inference" if kind.startswith("inference") else kind, self._runner(aot_gm))

    def _runner(self, aot_gm):
        if not self.standin:
            return compat.boxed_fn(aot_gm.forward)
        from graphtool.capture.standin.meta import standin_mode

        def run_on_standin(*args):
            with standin_mode():
                return aot_gm(*args)

        return compat.boxed_fn(run_on_standin)


def trace_model(
    spec: ModelSpec,
    *,
    inference: bool = False,
    record_breaks: bool = True,
    backend: str = "inductor",
    standin: bool = False,
    quiet: bool = True,
    dynamic: bool = False,
    on_region: Callable[[int], None] | None = None,
    host_values: HostValues | None = None,
    host_mode: str | None = None,
    steps: int = 1,
    wrapper: Any = None,
    schedule: Any = None,
    compile_dynamic: bool | None = None,
) -> Capture:
    """Compile and run ``spec`` once (forward, and backward in training) with ``backend``'s own AOT
    stage (``inductor``, ``aot_eager`` or ``cudagraphs``) and keep every graph it produces.

    ``wrapper`` (``--ddp``'s session) wraps the compiled model before it runs (``wrapper.wrap``:
    ``DDP(torch.compile(model))``) and names the inputs of the graphs it splits off, which torch
    hands the backend as fake tensors (``wrapper.input_names``: placeholder name -> parameter).
    ``host_mode`` ``"record"`` keeps every host value eager code reads (``.item()``...) in
    ``host_values``; ``"replay"`` answers the stand-in's host reads with them. ``steps`` runs the step
    that many times, as a loop would (see :mod:`graphtool.capture.steady_state`); ``capture.steps`` logs them.
    ``schedule`` (:class:`graphtool.capture.schedule.StepInputs`): steps 2.. run its inputs, one per step
    (``spec``'s own are step 1's); ``compile_dynamic``: ``torch.compile(dynamic=...)``."""
    torch = compat.import_torch()
    compat.dynamo_reset()
    autograd_captures = compat.compiled_autograd_captures()
    if standin or model_device(spec) == "meta":  # a custom op's eager call on meta runs its fake kernel: not a frame to compile
        compat.skip_fake_kernel_frames()
    training = wants_training(spec, inference)
    names = tensor_names(spec)
    keeping = KeepingBackend(names, backend=backend, standin=standin, on_region=on_region,
                             placeholder_names=getattr(wrapper, "input_names", None),
                             more_names=functools.partial(_optimizer_names, spec, names))
    if hasattr(wrapper, "use_backend"):  # --fsdp2: a script's own per-block compile records here too
        wrapper.use_backend(keeping)
    before = _metadata_snapshot(spec)
    recorder = BreakRecorder()  # always: its frame events explain a run that compiled nothing
    grad_mode = torch.no_grad() if inference else contextlib.nullcontext()
    meta_nonzero = compat.meta_nonzero_config() if standin else contextlib.nullcontext()
    fused_on_meta = compat.fused_optimizers_on_meta() if standin else contextlib.nullcontext()
    out, stopped = None, None
    host = contextlib.nullcontext()
    if host_values is not None and host_mode == "record":
        host = host_values.recording()
    elif host_values is not None and host_mode == "replay":
        host = host_values.replaying()
    # a model built on meta makes real meta constants inside the trace (pytorch#139092): accept them
    meta_constants = compat.meta_constants_as_fake()
    with quiet_torch_logs(quiet), recorder, grad_mode, meta_nonzero, fused_on_meta, compat.capture_config(), host, \
            meta_constants, young_generations_only():
        grad_enabled = torch.is_grad_enabled()  # a script's own torch.set_grad_enabled(False) included
        counted = compat.capture_counters()
        first: dict = {}

        def first_step_ended() -> None:
            if steps > 1:
                first.update(_facts(spec, keeping, recorder, record_breaks, before, names, counted, stopped=None, copy=True))

        try:
            out = _run_examples(torch, spec, keeping, training=training, dynamic=dynamic, standin=standin,
                                steps=steps, frames=recorder.frames, schedule=schedule, compile_dynamic=compile_dynamic,
                                first_step_ended=first_step_ended,
                                wrap=functools.partial(wrapper.wrap, spec=spec) if wrapper is not None else None)
        except GraphtoolError:
            raise
        except Exception as exc:
            if graphtool_frame(exc) is not None:  # graphtool's own failure, never a "stopped" trace
                raise graphtool_bug(spec, exc) from None
            if not (standin and keeping.regions):
                raise explain_failure(spec, exc, standin=standin, backend=backend, training=training,
                                      known=_known_before_failure(keeping)) from None
            # On the stand-in, eager code between graphs can need real data (.item() on meta):
            # keep the regions traced so far and say where the trace stopped.
            stopped = _stop_note(exc)
    if compat.compiled_autograd_captures() > autograd_captures:
        # compiled autograd traced each region's backward into its own graph (a region of its own here): the
        # backward AOT partitioned is never handed to a backward compiler, yet it is what that graph runs
        for region in keeping.regions:
            if region.backward is None and region.partitioned_backward is not None:
                region.backward = region.partitioned_backward
    return Capture(
        spec=spec,
        backend=backend,
        training=training,
        device=model_device(spec),
        outputs=out,
        stopped=stopped,
        no_backward=_no_backward(out) if training and keeping.regions and not stopped else None,
        steps=getattr(keeping, "step_log", None),
        own_step=getattr(keeping, "own_step", None),
        module_training=module_training(spec),
        grad_enabled=grad_enabled,
        first=first or None,
        **_facts(spec, keeping, recorder, record_breaks, before, names, counted, stopped=stopped),
    )


def _facts(spec, keeping, recorder, record_breaks, before, names, counted, *, stopped, copy: bool = False) -> dict:
    """The fields of a :class:`Capture` that grow with each step, as they stand now (``copy``: lists that later
    steps will not extend)."""
    keep = list if copy else (lambda items: items)
    return {
        "regions": keep(keeping.regions),
        "breaks": keep(recorder.breaks) if record_breaks else [],
        "skipped_frames": recorder.skipped_frames() if record_breaks else [],
        "no_graph": None if keeping.regions or stopped else _no_graph(recorder),
        "metadata_changes": _metadata_changes(spec, before, names),
        "counters": compat.counters_since(counted),
    }


def _compiled_autograd_on() -> bool:
    try:
        return bool(compat.dynamo_flag("compiled_autograd"))
    except Exception:  # a torch without the flag
        return False


def module_training(spec: ModelSpec) -> bool | None:
    """The model's own ``.training`` flag (``model.eval()`` clears it); None for a plain function."""
    flag = getattr(spec.model, "training", None)
    return flag if isinstance(flag, bool) else None


def _no_backward(out) -> str | None:
    """Why a training trace has no backward graph: the output holds no tensor that requires grad."""
    tensors = list(iter_tensors(out))
    if any(t.requires_grad and t.grad_fn is not None for t in tensors):
        return None
    what = type(out).__name__
    if not tensors:
        return f"the model's output ({what}) holds no tensor: nothing to differentiate, so no backward graph"
    return (f"no tensor in the model's output ({what}, {len(tensors)} tensor{'s' if len(tensors) != 1 else ''}) requires grad: "
            "nothing to differentiate, so no backward graph")


def _no_graph(recorder: BreakRecorder) -> str:
    import torch

    from graphtool.capture.no_graph import CompileSeen, no_graph_cause

    return no_graph_cause(recorder, CompileSeen(expected=compat.original_compile() or torch.compile, found=torch.compile))


def _run_examples(torch, spec: ModelSpec, backend, *, training: bool, dynamic: bool, standin: bool, steps: int = 1,
                  frames: list | None = None, wrap=None, schedule=None, compile_dynamic: bool | None = None,
                  first_step_ended: Callable[[], None] | None = None):
    """Compile the model with ``backend`` and run the example inputs (backward too, in training);
    then steps 2..``steps`` of a loop (:func:`graphtool.capture.steady_state.run_steps`). ``wrap``
    (``--ddp``) wraps the compiled model before it runs; ``first_step_ended`` is called between the two."""
    with standin_warnings_silenced() if standin else contextlib.nullcontext():
        compiled = torch.compile(spec.model, backend=backend, dynamic=compile_dynamic)
        runner = wrap(compiled) if wrap is not None else compiled
        watch = StepWatch(spec, backend.calls, [p for _, p in named_state(spec.model)[0]])
        out = runner(*spec.args, **spec.kwargs)
        backend.own_step = watch.verdict(out)
        if backend.own_step is not None:  # the step ran its own backward (or is the optimizer's): never one on top
            training = False
        if training:
            _run_backward(torch, out)
        # --dynamic's second size, its inputs named as the forward names them; the steps call it again
        variant = functools.partial(run_variant, spec, compiled, to_device=standin and "meta",
                                    on_inputs=functools.partial(_name_inputs, spec, backend.names)) if dynamic else None
        if variant is not None:  # a second size: dynamo recompiles with symbolic sizes, one more region
            more = variant()
            if training:
                _run_backward(torch, more)
        if first_step_ended is not None:
            first_step_ended()
        backend.step_log = run_steps(spec, runner, backend.calls, out, steps=steps, training=training,
                                     reset=backend.own_step is None,
                                     backward=functools.partial(_run_backward, torch),
                                     frames=frames if frames is not None else [], regions=backend.regions, variant=variant,
                                     inputs=_named_schedule(spec, backend.names, schedule),
                                     signature=getattr(schedule, "signature", None), on_step=getattr(schedule, "on_step", None))
    return out


def _named_schedule(spec: ModelSpec, names: dict, schedule) -> list | None:
    """The schedule's later steps as ``(args, kwargs)``, their inputs named as the forward names them."""
    if schedule is None:
        return None
    for args, kwargs in schedule.later:
        _name_inputs(spec, names, args, kwargs)
    return list(schedule.later)


#: what torch warns about only because graphtool runs the graphs on its meta stand-in (a loss's
#: ``nll_loss`` run through the stand-in's dispatch mode has no autograd kernel there): not the user's
STANDIN_WARNINGS = (r".*an autograd kernel was not registered to the Autograd key",)


@contextlib.contextmanager
def standin_warnings_silenced():
    """Silence :data:`STANDIN_WARNINGS` for the stand-in run only; the own-device run still shows them. Also
    the ops that decompose for autograd do so on meta too (:func:`compat.composites_keep_autograd_on_meta`:
    without it a ``cross_entropy`` loss gave the stand-in's parameters no gradient)."""
    import warnings

    with warnings.catch_warnings(), compat.composites_keep_autograd_on_meta():
        for message in STANDIN_WARNINGS:
            warnings.filterwarnings("ignore", message=message)
        yield


def _run_backward(torch, out) -> None:
    leaves = [t for t in iter_tensors(out) if t.requires_grad and t.grad_fn is not None]
    if leaves:
        torch.autograd.backward(leaves, [torch.ones_like(t) for t in leaves])


def tensor_names(spec: ModelSpec) -> dict[int, tuple[str, str]]:
    """id(tensor) -> (kind, name) for parameters, buffers and user inputs."""
    names: dict[int, tuple[str, str]] = {}
    params, buffers = named_state(spec.model)  # a function's global modules' state by their FQNs
    for fqn, p in params:
        names.setdefault(id(p), ("parameter", fqn))
    for fqn, b in buffers:
        names.setdefault(id(b), ("buffer", fqn))
    for tid, name in argument_names(spec).items():
        names.setdefault(tid, ("user_input", name))
    return names


def _optimizer_names(spec: ModelSpec, names: dict) -> dict:
    """Names for the optimizers' state the step reaches, made lazily by its first ``step()`` (dynamo runs
    the optimizer's ``_init_group`` for real while it traces): read when a region compiles."""
    params = {tid: name for tid, (kind, name) in names.items() if kind == "parameter"}
    for tid, name in script_parameter_names(spec).items() if optimizer_of_step(spec.model) is not None else ():
        params.setdefault(tid, name)
    return optimizer_state_names(spec.model, params, sys.modules.get(spec.module_name or ""))


def _name_inputs(spec: ModelSpec, names: dict, args: tuple, kwargs: dict) -> None:
    """Name another call's inputs (``--dynamic``'s second size) as the forward names them, as
    :func:`tensor_names` names the example inputs: ``input``, not the ``args[0]`` dynamo reads it from."""
    for tid, name in argument_names(dataclasses.replace(spec, args=tuple(args), kwargs=dict(kwargs))).items():
        names.setdefault(tid, ("user_input", name))


def _placeholders(gm) -> list:
    return [n for n in gm.graph.nodes if n.op == "placeholder"]


def _attribute_refs(gm, names: dict) -> dict[str, InputRef]:
    """Attribute name -> what it is, for every tensor dynamo's graph holds as an attribute (AOT lifts them as
    inputs): a compiled optimizer's parameters and state tensors, named as :func:`tensor_names` names them."""
    refs: dict[str, InputRef] = {}
    for target, t in [*gm.named_parameters(remove_duplicate=False), *gm.named_buffers(remove_duplicate=False)]:
        kind, name = names.get(id(t), ("other", target))
        refs[target] = InputRef(kind, name, name if kind in ("parameter", "buffer") else None)
    return refs


def _in_place_writes(gm) -> dict[int, str]:
    """Placeholder index -> the stack trace of the last in-place method or function (``copy_``, ``add_``,
    ``x[:] = y``) called on it."""
    index = {n: i for i, n in enumerate(_placeholders(gm))}
    found: dict[int, str] = {}
    for node in gm.graph.nodes:
        if node.op not in ("call_method", "call_function") or not node.args or node.args[0] not in index:
            continue
        name = node.target if isinstance(node.target, str) else getattr(node.target, "__name__", "")
        in_place = (name.endswith("_") and not name.startswith("_")) or name == "setitem"  # cache[:] = x
        if in_place and node.meta.get("stack_trace"):
            found[index[node.args[0]]] = node.meta["stack_trace"]
    return found


def _classify(value, node, names, placeholder_names=None) -> InputRef:
    kind, name = names.get(id(value), (None, None))
    if kind is None and placeholder_names and node.name in placeholder_names:
        kind, name = placeholder_names[node.name]
    if kind is None:
        # not a tensor of the model's: name it as the user's code does (``y``), not as dynamo does (``l_y_``)
        source = compat.placeholder_source(node) if hasattr(value, "shape") else None  # a size symbol keeps its name (s0)
        if source is None:
            return InputRef("other", node.name, None)
        return InputRef(*source_kind_and_name(source), None)
    return InputRef(kind, name, name if kind in ("parameter", "buffer") else None)


def _metadata_snapshot(spec: ModelSpec) -> dict[int, tuple]:
    # dynamo applies metadata mutations of inputs (t_, set_) outside the graph: AOT never sees
    # them, so compare each input's view of its storage before and after the run.
    return {id(t): _meta_of(t) for t in iter_tensors((spec.args, spec.kwargs))}


def _meta_of(t) -> tuple:
    return (tuple(t.shape), tuple(t.stride()), t.storage_offset(), compat.storage_key(t))


def _metadata_changes(spec: ModelSpec, before: dict[int, tuple], names) -> dict[str, str]:
    changes: dict[str, str] = {}
    for t in iter_tensors((spec.args, spec.kwargs)):
        old = before.get(id(t))
        if old is None:
            continue
        new = _meta_of(t)
        name = names.get(id(t), ("user_input", "?"))[1]
        if old[3] != new[3]:
            changes[name] = "storage"
        elif old[:3] != new[:3]:
            changes[name] = "metadata"
    return changes


def _stop_note(exc: BaseException) -> str:
    from graphtool.capture.user.boundary import user_frames

    frames = user_frames(exc)
    where = f"{frames[-1].filename}:{frames[-1].lineno}: " if frames else ""
    first = (str(exc).strip().splitlines() or [""])[0]
    hop = compat.higher_order_in_traceback(exc)
    if hop is not None:  # graphtool's limit, not the model's: said so
        return (f"{where}the stand-in trace stopped: graphtool cannot yet run {hop} (a higher-order op) on the meta "
                f"stand-in ({type(exc).__name__}: {first}); later regions were not analysed")
    return f"{where}the stand-in trace stopped ({type(exc).__name__}: {first}); later regions were not analysed"


def _known_before_failure(backend: KeepingBackend) -> str | None:
    """What AOT autograd had found before torch failed: the inputs each region's forward mutates. A region
    whose compile raised still had its forward's metadata pass (it runs before the joint trace, the
    partitioner and the backend's compilers); a failure after the compile (AOT's backward at run time)
    leaves the compiled regions' records."""
    found: list[tuple[str, str, tuple[str, ...], bool]] = []  # name, kind, how, under no_grad
    for region in backend.regions:
        found += [(r.ref.name, r.ref.kind, r.mutation_kinds, r.under_no_grad)
                  for r in region.forward_inputs if r.mutated and r.ref is not None and r.role == "plain"]
    if backend.failed is not None and backend.failed[1] is not None:
        region, meta = backend.failed
        flags = compat.input_mutation_flags(meta)
        if len(flags) == len(region.inputs):
            for pos, (ref, f) in enumerate(zip(region.inputs, flags)):
                rec = InputRecord(pos, "", "plain", ref, **f)  # read as decode_forward reads a compiled region's
                if rec.mutated:
                    found.append((ref.name, ref.kind, rec.mutation_kinds, rec.under_no_grad))
    elif not backend.regions:
        return None
    if not found:
        return "before it failed, AOT autograd found that the forward mutates none of its inputs"
    listed = ", ".join(f"{name} ({kind}, {'/'.join(how)}{', under no_grad' if no_grad else ''})"
                       for name, kind, how, no_grad in found)
    return f"before it failed, AOT autograd found that the forward mutates {len(found)} input{'s' if len(found) != 1 else ''}: {listed}"


def explain_failure(spec: ModelSpec, exc: BaseException, *, standin: bool = False, backend: str | None = None,
                    training: bool = False, known: str | None = None) -> Exception:
    """Whose fault a failed trace is: the user's when eager fails too; torch's when
    ``torch.compile(backend=...)`` fails as well; else graphtool's own (exit 3). An error graphtool
    already explained (``--dynamic`` inputs the model does not accept) stays as it is.

    torch's failure names the stage that raised (dynamo, AOT autograd, inductor's lowering), torch's
    exception and the user's line nearest to it; past dynamo, whether ``--backend aot_eager`` gets
    through; ``known``: what was computed before the failure (AOT's forward metadata), kept in the detail."""
    if isinstance(exc, GraphtoolError):
        return exc
    ours = next((e for e in exception_chain(exc) if isinstance(e, GraphtoolError)), None)
    if ours is not None:  # raised inside the backend, wrapped by dynamo: graphtool's own message stands
        return ours
    if graphtool_frame(exc) is not None:
        return graphtool_bug(spec, exc)
    try:
        spec.model(*spec.args, **spec.kwargs)
    except Exception as eager_exc:
        if standin:
            return model_call_error(
                spec, eager_exc, "the model raised on the accelerator stand-in (moved to meta, standing for cuda:0)"
            ).with_hint(
                "a line that mixes devices (a CPU tensor or torch.Generator with the model's device) would "
                "fail on a GPU too; a line that needs tensor values (.item(), printing) cannot run on the "
                "stand-in: check it on a GPU"
            )
        return model_call_error(spec, eager_exc)
    from graphtool.capture.bench.modes import describe_error

    said = describe_error(exc)  # BackendCompilerFailed says only "backend=... raised:": name the cause it wraps
    if backend is not None and not standin and _torch_compiles(spec, backend, training):
        return GraphtoolBug(
            f"{spec.location}: graphtool could not trace this model, which torch.compile(backend={backend!r}) "
            f"compiles and runs: {said}",
            hint="this is a bug in graphtool: please report it with the output of --debug",
            full_traceback=full_traceback(exc),
        )
    site = nearest_user_frame(exc)
    where = f"{site[0]}:{site[1]}" if site else _model_site(spec)  # never the factory's def line: it is not what failed
    stage = compat.compile_stage_of(exception_chain(exc)) or torch_stage(exc)
    said += _dynamo_explanation(exc) if stage == "dynamo" else ""
    hint = "run with --debug for torch's full message"
    if backend not in (None, "aot_eager") and not standin and stage != "dynamo":
        if _torch_compiles(spec, "aot_eager", training):
            hint = (f"--backend aot_eager traces it: the failure is in {backend}'s own stage"
                    f"{f' ({stage})' if stage else ''}, not in the model; {hint}")
        else:
            hint = f"--backend aot_eager fails too; {hint}"
    return TraceFailed(
        f"{where}: torch.compile could not trace the model "
        f"(it runs eagerly{f'; {stage} failed' if stage else ''}): {said}",
        hint=hint,
        detail=known,
        full_traceback=full_traceback(exc),
    )


def _dynamo_explanation(exc: BaseException) -> str:
    """The error dynamo met under its own (``RuntimeError when making fake tensor call``), from the
    "Explanation:" its message carries: ``; got RuntimeError: There was no fake impl registered for ...``."""
    import re

    for e in exception_chain(exc):
        m = re.search(r"Explanation:.*?\bgot (\w+)\((['\"])(.*?)\2\)", str(e), re.S)
        if m:
            first = m.group(3).split(". ")[0].rstrip(".")
            return f"; got {m.group(1)}: {first}"
    return ""


def _model_site(spec: ModelSpec) -> str:
    """``file:line`` of what torch.compile traced, where no user frame is nearer to a failure: the model's
    ``forward`` (a function's own ``def``), else the script."""
    import inspect

    model = spec.model
    target = getattr(type(model), "forward", None) if not inspect.isroutine(model) else model
    try:
        target = inspect.unwrap(target)
        return f"{inspect.getsourcefile(target)}:{inspect.getsourcelines(target)[1]}"
    except (TypeError, OSError):
        return str(spec.path)


def graphtool_bug(spec: ModelSpec, exc: BaseException) -> GraphtoolBug:
    """An exception raised by graphtool's own code while tracing (see :func:`graphtool_frame`): exit 3,
    graphtool's frames shown, whatever torch wrapped it in."""
    import traceback

    root = exception_chain(exc)[-1]
    frame = graphtool_frame(exc)
    detail = "".join(traceback.format_list(graphtool_frames(root))) + "".join(traceback.format_exception_only(type(root), root))
    return GraphtoolBug(
        f"graphtool failed while tracing {spec.path} ({frame.filename}:{frame.lineno}, in {frame.name}): "
        f"{type(root).__name__}: {root}",
        hint="this is a bug in graphtool, not in the model or torch: please report it with this traceback "
             "(--debug shows every frame)",
        detail=detail.rstrip(),
        full_traceback=full_traceback(exc),
    )


def _torch_compiles(spec: ModelSpec, backend: str, training: bool) -> bool:
    """Whether a real ``torch.compile(backend=...)`` runs the example inputs (and backward in training)."""
    import torch

    compat.dynamo_reset()
    try:
        out = torch.compile(spec.model, backend=backend)(*spec.args, **spec.kwargs)
        if training:
            _run_backward(torch, out)
    except Exception:
        return False
    finally:
        compat.dynamo_reset()
    return True
