"""Trace a model the way torch.compile does: dynamo, then AOT autograd inside a backend.

The backend is built like torch's own cudagraphs backend (``aot_autograd(fw_compiler=...,
bw_compiler=...)``) with compilers that keep each GraphModule and run it unchanged. Every region
dynamo captures (several when the model has graph breaks) becomes one :class:`Region`, in the order
torch compiled them, with its forward, its backward (in training) and AOT's ViewAndMutationMeta.

Example::

    >>> cap = trace_model(load_model("examples/mlp.py"))   # doctest: +SKIP
    >>> [len(r.forward.graph.nodes) for r in cap.regions]
    [14]
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from typing import Any, Callable

from graphtool.capture import compat
from graphtool.capture.breaks import BreakRecorder, GraphBreak, quiet_torch_logs
from graphtool.capture.loader import ModelSpec, argument_names, full_traceback, iter_tensors, user_code_error
from graphtool.errors import TraceFailed


@dataclass(frozen=True)
class InputRef:
    """What one dynamo graph input is, found by identity against the model's own tensors."""

    kind: str  # parameter | buffer | user_input | other
    name: str  # FQN, forward argument name, or dynamo's placeholder name
    target: str | None  # the FQN for parameters and buffers


@dataclass
class Region:
    """One compiled region: dynamo's graph plus AOT's forward and backward."""

    index: int
    dynamo_graph: Any
    inputs: list[InputRef]
    forward: Any = None
    backward: Any = None
    fw_metadata: Any = None
    num_aot_inputs: int = 0
    inference: bool = False
    example_inputs: list = field(default_factory=list)
    aot_input_types: list = field(default_factory=list)


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


def wants_training(spec: ModelSpec, inference: bool) -> bool:
    """Training when any parameter or input requires grad, unless ``--inference``."""
    if inference:
        return False
    params = spec.model.parameters() if hasattr(spec.model, "parameters") else ()
    if any(p.requires_grad for p in params):
        return True
    return any(t.requires_grad for t in iter_tensors((spec.args, spec.kwargs)))


def model_device(spec: ModelSpec) -> str:
    """The model's main device: its parameters', else its inputs'."""
    tensors = list(spec.model.parameters()) if hasattr(spec.model, "parameters") else []
    tensors = tensors or list(iter_tensors((spec.args, spec.kwargs)))
    return str(tensors[0].device.type) if tensors else "cpu"


def trace_model(
    spec: ModelSpec,
    *,
    inference: bool = False,
    record_breaks: bool = True,
    keep_inference_input_mutations: bool = False,
    standin: bool = False,
    quiet: bool = True,
    dynamic: bool = False,
    on_region: Callable[[int], None] | None = None,
) -> Capture:
    """Compile and run ``spec`` once (forward, and backward in training) and keep every graph."""
    torch = compat.import_torch()
    compat.dynamo_reset()
    training = wants_training(spec, inference)
    regions: list[Region] = []
    names = _tensor_names(spec)

    def _runner(aot_gm):
        if not standin:
            return compat.boxed_fn(aot_gm.forward)
        from graphtool.capture.standin import standin_mode

        def run_on_standin(*args):
            with standin_mode():
                return aot_gm(*args)

        return compat.boxed_fn(run_on_standin)

    def backend(gm, example_inputs):
        region = Region(
            index=len(regions),
            dynamo_graph=gm,
            inputs=[_classify(t, node, names) for t, node in zip(example_inputs, _placeholders(gm))],
            example_inputs=list(example_inputs),
        )
        regions.append(region)
        if on_region:
            on_region(region.index)

        def fw(aot_gm, aot_inputs):
            region.forward = aot_gm
            region.fw_metadata = compat.current_fw_metadata()
            region.num_aot_inputs = len(aot_inputs)
            region.aot_input_types = [compat.cudagraph_input_type(x) for x in aot_inputs]
            return _runner(aot_gm)

        def infer(aot_gm, aot_inputs):
            region.inference = True
            return fw(aot_gm, aot_inputs)

        def bw(aot_gm, aot_inputs):
            region.backward = aot_gm
            return _runner(aot_gm)

        return compat.aot_autograd_backend(
            fw_compiler=fw,
            bw_compiler=bw,
            inference_compiler=infer,
            keep_inference_input_mutations=keep_inference_input_mutations,
        )(gm, example_inputs)

    before = _metadata_snapshot(spec)
    recorder = BreakRecorder() if record_breaks else contextlib.nullcontext()
    grad_mode = torch.no_grad() if inference else contextlib.nullcontext()
    meta_nonzero = compat.meta_nonzero_config() if standin else contextlib.nullcontext()
    with quiet_torch_logs(quiet), recorder, grad_mode, meta_nonzero:
        out, stopped = None, None
        try:
            compiled = torch.compile(spec.model, backend=backend)
            out = compiled(*spec.args, **spec.kwargs)
            if training:
                _run_backward(torch, out)
            if dynamic:  # a second size: dynamo recompiles with symbolic sizes, one more region
                from graphtool.capture.lintrun import dynamic_variant

                args, kwargs = dynamic_variant(spec, to_device=standin and "meta")
                more = compiled(*args, **kwargs)
                if training:
                    _run_backward(torch, more)
        except Exception as exc:  # noqa: BLE001 - decide below whose fault it is
            if not (standin and regions):
                raise explain_failure(spec, exc, standin=standin) from None
            # On the stand-in, eager code between graphs can need real data (.item() on meta):
            # keep the regions traced so far and say where the trace stopped.
            stopped = _stop_note(exc)
    breaks = recorder.breaks if record_breaks else []
    changes = _metadata_changes(spec, before, names)
    return Capture(
        spec=spec,
        regions=regions,
        training=training,
        device=model_device(spec),
        breaks=breaks,
        outputs=out,
        metadata_changes=changes,
        stopped=stopped,
    )


def _run_backward(torch, out) -> None:
    leaves = [t for t in iter_tensors(out) if t.requires_grad and t.grad_fn is not None]
    if leaves:
        torch.autograd.backward(leaves, [torch.ones_like(t) for t in leaves])


def _tensor_names(spec: ModelSpec) -> dict[int, tuple[str, str]]:
    """id(tensor) -> (kind, name) for parameters, buffers and user inputs."""
    names: dict[int, tuple[str, str]] = {}
    if hasattr(spec.model, "named_parameters"):
        for fqn, p in spec.model.named_parameters(remove_duplicate=False):
            names.setdefault(id(p), ("parameter", fqn))
        for fqn, b in spec.model.named_buffers(remove_duplicate=False):
            names.setdefault(id(b), ("buffer", fqn))
    for tid, name in argument_names(spec).items():
        names.setdefault(tid, ("user_input", name))
    return names


def _placeholders(gm) -> list:
    return [n for n in gm.graph.nodes if n.op == "placeholder"]


def _classify(value, node, names) -> InputRef:
    kind, name = names.get(id(value), (None, None))
    if kind is None:
        return InputRef("other", node.name, None)
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
    from graphtool.capture.loader import user_frames

    frames = user_frames(exc)
    where = f"{frames[-1].filename}:{frames[-1].lineno}: " if frames else ""
    first = (str(exc).strip().splitlines() or [""])[0]
    return f"{where}the stand-in trace stopped ({type(exc).__name__}: {first}); later regions were not analysed"


def explain_failure(spec: ModelSpec, exc: BaseException, *, standin: bool = False) -> Exception:
    """A failed compile is the user's fault when eager fails too; else torch could not trace it."""
    try:
        spec.model(*spec.args, **spec.kwargs)
    except Exception as eager_exc:  # noqa: BLE001
        if standin:
            err = user_code_error(
                eager_exc, "the model raised on the accelerator stand-in (moved to meta, standing for cuda:0)"
            )
            err.hint = (
                "a line that mixes devices (a CPU tensor or torch.Generator with the model's device) would "
                "fail on a GPU too; a line that needs tensor values (.item(), printing) cannot run on the "
                "stand-in: check it on a GPU"
            )
            return err
        return user_code_error(eager_exc, "the model raised on its example inputs")
    first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    err = TraceFailed(
        f"{spec.location}: torch.compile could not trace the model "
        f"(it runs eagerly): {type(exc).__name__}: {first}",
        hint="run with --debug for torch's full message",
    )
    err.full_traceback = full_traceback(exc)
    return err
