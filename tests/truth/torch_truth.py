"""What torch itself says about a model: a real ``torch.compile(model, backend=B)`` run, listened to.

:func:`run_torch` imports a model script (graphtool's convention, with its own small loader), calls
``torch._dynamo.reset()``, compiles the model with the named backend, runs the forward and, in
training, a backward, while a :class:`TraceListener` sits on torch's structured-trace logger
(``torch.__trace``, what ``TORCH_TRACE`` and tlparse read). Nothing of torch is replaced: the
listener only keeps what torch logs, plus what torch's own compile state holds at the moment it logs:

- ``aot_forward_graph`` / ``aot_backward_graph`` / ``aot_inference_graph`` payloads (the printed graphs),
  and inductor's ``after_joint_graph`` artifact: an inference graph after the joint-graph passes
  ``compile_fx_forward`` runs on it, as inductor's inner compiler receives it (training graphs get
  those passes in inductor's partitioner, before their ``aot_*_graph`` artifacts are printed);
- ``dynamo_graph_break_reason`` payloads and ``compilation_metrics`` events (fail_type, fail_reason);
- the ``aot_forward_graph_fw_metadata`` payload (AOT's ViewAndMutationMeta printed, training only);
- AOT's live ViewAndMutationMeta (``TracingContext.fw_metadata``: per-input mutation flags and
  ``static_input_indices``), read when torch logs the records that follow its compile;
- dynamo's output graph's placeholders with their real example tensors (``grapharg.example``), found
  on the stack of the call that logs ``dynamo_output_graph``, named by identity against the model's
  ``named_parameters()`` / ``named_buffers()``.

The only setting touched is AOT autograd's cache (off), so each compile really runs AOT and the live
metadata is there to be read; the graphs it logs are the same with the cache on.
"""

from __future__ import annotations

import collections
import importlib.util
import logging
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from graphtool.capture.graph_breaks import TraceLogListener

GRAPH_KEYS = ("aot_forward_graph", "aot_backward_graph", "aot_inference_graph")
MODELS_DIR = Path(__file__).resolve().parent / "models"
TRACE_LOGGER = "torch.__trace"

_BREAK_AT = re.compile(r"Graph break in user code at (?P<file>.+?):(?P<line>\d+)")
_REASON = re.compile(r"Graph Break Reason:\s*(?P<reason>.*)")
_RESUME_SKIP = "torch.compile will skip tracing the frame"
_SKIPS_FUNCTION = "Failed to handle graph break gracefully. Skipping the function"


def model_path(name: str) -> str:
    """``models/NAME.py``, or ``name`` itself when it is a path to a script."""
    return name if name.endswith(".py") else str(MODELS_DIR / f"{name}.py")


# ------------------------------------------------------------------ graph text
_ASSIGN = re.compile(r'^ {8}(\w+)(?:: "[^"]*")? = (.*)$')
_PH = re.compile(r"^ {8}(\w+)(?::|,)")


def parse_graph_text(txt: str) -> tuple[int, dict[str, int]]:
    """Top-level graph of a ``print_readable()`` text -> (number of nodes, call_function histogram).

    >>> txt = '''class GraphModule(torch.nn.Module):
    ...     def forward(
    ...         self,
    ...         primals_1: "f32[4][1]cpu",  # PlainAOTInput(idx=0)
    ...     ):
    ...         mul: "f32[4][1]cpu" = torch.ops.aten.mul.Tensor(primals_1, 2);  primals_1 = None
    ...         return (mul,)
    ... '''
    >>> parse_graph_text(txt)
    (3, {'aten.mul.Tensor': 1})
    """
    n_ph = 0
    hist: collections.Counter = collections.Counter()
    n_other = 0
    in_def = in_body = False
    for ln in txt.split("\n"):
        if ln.startswith("    def forward("):
            in_def = not ln.rstrip().endswith("):")
            if not in_def:  # one-line def (not expanded)
                inner = re.sub(r'"[^"]*"', "", ln[ln.index("(") + 1: ln.rindex(")")])
                n_ph = len([a for a in inner.split(",") if a.strip() and a.strip() != "self"])
            in_body = True
            continue
        if in_def:
            if ln.startswith("    ):"):
                in_def = False
            elif _PH.match(ln) and ln.strip() != "self,":
                n_ph += 1
            continue
        if not in_body:
            continue
        if ln.startswith("    ") and not ln.startswith("        ") and ln.strip():
            break  # the next member of the class (nested subgraph classes sit at indent 4)
        m = _ASSIGN.match(ln)
        if not m:
            continue
        rhs = m.group(2).split(";  ")[0]
        if rhs.startswith("torch.ops."):
            hist[rhs[len("torch.ops."): rhs.index("(")]] += 1
        elif re.match(r"^\w+\[\d+\]$", rhs):
            hist["getitem"] += 1
        else:
            n_other += 1  # get_attr (self.x) and the like
    return n_ph + sum(hist.values()) + n_other + 1, dict(hist)


_PH_DESC = re.compile(r'^ {8}(?P<name>\w+): "[^"]*",(?:\s+# (?P<desc>.*))?$')
_IDX = re.compile(r"idx=(?P<idx>\d+)")


def placeholder_descriptors(txt: str) -> dict[str, tuple[str, int | None]]:
    """Placeholder name -> (role, dynamo input index) from the descriptor comments AOT prints after each
    placeholder of an ``aot_*_graph`` artifact. Roles: ``plain`` (a dynamo input), ``view_base`` (AOT's
    synthetic base of aliased inputs, for the input named), ``tangent``, ``token`` (an effect token),
    ``other`` (no descriptor: a saved activation; or rng state).

    >>> placeholder_descriptors('        primals_1: "f32[4][1]cpu",  # PlainAOTInput(idx=0)\\n        relu: "f32[4][1]cpu",')
    {'primals_1': ('plain', 0), 'relu': ('other', None)}
    """
    out: dict[str, tuple[str, int | None]] = {}
    for ln in txt.split("\n"):
        m = _PH_DESC.match(ln)
        if not m:
            continue
        desc = (m.group("desc") or "").strip()
        idx = _IDX.search(desc)
        if desc.startswith("PlainAOTInput("):
            out[m.group("name")] = ("plain", int(idx.group("idx")))
        elif desc.startswith(("ViewBaseAOTInput(", "SyntheticBaseAOTInput(")):
            out[m.group("name")] = ("view_base", int(idx.group("idx")) if idx else None)
        elif desc.startswith("TangentAOTInput"):
            out[m.group("name")] = ("tangent", None)
        elif desc.startswith(("ForwardTokenAOTInput", "BackwardTokenAOTInput")):
            out[m.group("name")] = ("token", None)
        else:
            out[m.group("name")] = ("other", None)
    return out


def aot_inputs(txt: str) -> list[tuple[str, int | None]]:
    """The inputs AOT's ViewAndMutationMeta describes (``input_info[j]``, ``static_input_indices``), in
    order, as (role, dynamo input index): the forward graph's placeholders without effect tokens."""
    return [d for d in placeholder_descriptors(txt).values() if d[0] in ("plain", "view_base")]


def graph_text(gm) -> str:
    """A GraphModule printed the way AOT autograd prints its ``aot_*_graph`` artifacts."""
    return gm.print_readable(print_output=False, include_stride=True, include_device=True, expanded_def=True)


def hist_diff(mine: dict, theirs: dict) -> dict[str, tuple[int, int]]:
    """``{op: (count in mine, count in theirs)}`` for every op whose counts differ."""
    return {k: (mine.get(k, 0), theirs.get(k, 0)) for k in sorted(set(mine) | set(theirs)) if mine.get(k, 0) != theirs.get(k, 0)}


# ------------------------------------------------------------------ what torch logged
@dataclass
class MetaFacts:
    """AOT's ViewAndMutationMeta of one compiled graph, as plain values (indices are dynamo's inputs)."""

    static_input_indices: tuple[int, ...]
    input_info: tuple[dict, ...]  # mutates_data, mutates_metadata, mutates_storage, under_no_grad
    output_info: tuple[tuple[str, int | None], ...] = ()  # (OutputType name, base index) per user output


@dataclass
class DynamoInput:
    position: int
    name: str  # the placeholder's name in dynamo's graph
    kind: str  # parameter | buffer | tensor | other
    fqns: tuple[str, ...] = ()  # every name the model has for it (tied weights have several)


@dataclass
class TorchRegion:
    compile_id: str
    graphs: dict[str, str] = field(default_factory=dict)  # aot_*_graph -> payload
    after_joint_graph: str | None = None  # inductor, inference: the graph its inner compiler lowers
    fw_metadata_text: str | None = None
    meta: MetaFacts | None = None
    inputs: list[DynamoInput] | None = None


@dataclass
class TorchBreak:
    file: str | None
    line: int | None
    reason: str
    skips_frame: bool
    compile_id: str | None
    payload: str = field(default="", repr=False)


@dataclass
class TorchRun:
    """What one real ``torch.compile`` run logged."""

    model: str
    backend: str
    training: bool
    regions: list[TorchRegion]
    breaks: list[TorchBreak]
    skip_notes: list[str]  # convert_frame's "will skip tracing the frame" payloads
    metrics: list[dict]  # compilation_metrics events
    error: str | None = None  # the real run raised (its artifacts up to there are kept)

    def skipped_frames(self) -> set[tuple[str | None, str | None, int | None]]:
        """(co_name, co_filename, co_firstlineno) of every frame a compile failed on (``fail_type``)."""
        return {(m.get("co_name"), m.get("co_filename"), m.get("co_firstlineno")) for m in self.metrics if m.get("fail_type")}


def _compile_id(meta: dict) -> str | None:
    if meta.get("frame_id") is None:
        return None
    return f"{meta['frame_id']}/{meta.get('frame_compile_id')}"


def _meta_facts(fw_metadata) -> MetaFacts:
    return MetaFacts(
        static_input_indices=tuple(getattr(fw_metadata, "static_input_indices", None) or ()),
        input_info=tuple(
            {
                "mutates_data": bool(i.mutates_data),
                "mutates_metadata": bool(i.mutates_metadata),
                "mutates_storage": bool(getattr(i, "mutates_storage_metadata", False)),
                "under_no_grad": bool(getattr(i, "mutations_under_no_grad_or_inference_mode", False)),
            }
            for i in fw_metadata.input_info
        ),
        output_info=tuple((o.output_type.name, o.base_idx) for o in fw_metadata.output_info),
    )


class TraceListener(TraceLogListener):
    """What torch itself logs to ``torch.__trace`` while it compiles (graphtool's listener plumbing,
    none of its parsing); ``names`` maps id(tensor) -> (kind, fqns) for the model being compiled."""

    def __init__(self, names: dict[int, tuple[str, tuple[str, ...]]]):
        super().__init__()
        self.names = names
        self.regions: dict[str, TorchRegion] = {}
        self.breaks: list[TorchBreak] = []
        self.skip_notes: list[str] = []
        self.metrics: list[dict] = []


    def _region(self, cid: str | None) -> TorchRegion:
        cid = cid or "?"
        if cid not in self.regions:
            self.regions[cid] = TorchRegion(cid)
        return self.regions[cid]

    def emit(self, record: logging.LogRecord) -> None:
        meta = getattr(record, "metadata", None)
        if not isinstance(meta, dict) or not meta:
            return
        payload = getattr(record, "payload", None)
        cid = _compile_id(meta)
        key = next(iter(meta))
        if key in GRAPH_KEYS:
            self._region(cid).graphs[key] = payload or ""
        elif key == "dynamo_output_graph":
            self._region(cid).inputs = self._dynamo_inputs()
        elif key == "compilation_metrics":
            self.metrics.append(dict(meta["compilation_metrics"]))
        elif key == "artifact":
            name = meta["artifact"].get("name")
            if name == "dynamo_graph_break_reason":
                self._break(payload or "", cid)
            elif name == "after_joint_graph":
                self._region(cid).after_joint_graph = payload
            elif name == "aot_forward_graph_fw_metadata":
                self._region(cid).fw_metadata_text = payload
        self._read_fw_metadata(cid)

    def _break(self, payload: str, cid: str | None) -> None:
        if _RESUME_SKIP in payload:
            self.skip_notes.append(payload)
            return
        at = _BREAK_AT.search(payload)
        reason = _REASON.search(payload)
        self.breaks.append(TorchBreak(
            file=at.group("file") if at else None,
            line=int(at.group("line")) if at else None,
            reason=reason.group("reason").strip() if reason else (payload.strip().splitlines() or [""])[0],
            skips_frame=_SKIPS_FUNCTION in payload,
            compile_id=cid,
            payload=payload,
        ))

    def _read_fw_metadata(self, cid: str | None) -> None:
        """AOT sets TracingContext.fw_metadata just before its final compilers run; the records logged
        after that (inductor's, the runtime wrappers') find it there."""
        if cid is None or (cid in self.regions and self.regions[cid].meta is not None):
            return
        from torch._guards import TracingContext

        ctx = TracingContext.try_get()
        fw_metadata = getattr(ctx, "fw_metadata", None) if ctx is not None else None
        if fw_metadata is not None:
            self._region(cid).meta = _meta_facts(fw_metadata)

    def _dynamo_inputs(self) -> list[DynamoInput] | None:
        """The placeholders of the graph dynamo is about to hand to the backend, found on the stack of
        ``OutputGraph.compile_and_call_fx_graph`` (which logs ``dynamo_output_graph``)."""
        f = sys._getframe()
        while f is not None:
            if f.f_code.co_name == "compile_and_call_fx_graph" and "gm" in f.f_locals:
                break
            f = f.f_back
        if f is None:
            return None
        out = []
        for pos, node in enumerate(n for n in f.f_locals["gm"].graph.nodes if n.op == "placeholder"):
            grapharg = node.meta.get("grapharg")
            example = getattr(grapharg, "example", None) if grapharg is not None else None
            kind, fqns = self.names.get(id(example), ("tensor" if example is not None else "other", ()))
            out.append(DynamoInput(pos, node.name, kind, fqns))
        return out


# ------------------------------------------------------------------ running the model
def load_script(path: str):
    """``get_model_and_inputs()`` of a model script -> (model, args, kwargs); a fresh import each call."""
    spec = importlib.util.spec_from_file_location(f"truth_model_{Path(path).stem}", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dynamo looks a decorated function's module up by name
    spec.loader.exec_module(module)
    if hasattr(module, "get_model_and_inputs"):
        got = module.get_model_and_inputs()
    else:  # module-level ``model`` and ``example_inputs``, graphtool's other convention
        got = (module.model, module.example_inputs, getattr(module, "example_kwargs", {}))
    model, args = got[0], got[1]
    kwargs = got[2] if len(got) > 2 else {}
    return model, (args if isinstance(args, tuple) else (args,)), kwargs


def tensor_names(model) -> dict[int, tuple[str, tuple[str, ...]]]:
    """id(tensor) -> ("parameter" | "buffer", every FQN of it, in named_* order)."""
    names: dict[int, tuple[str, list[str]]] = {}
    if not hasattr(model, "named_parameters"):  # a plain function
        return {}
    for fqn, p in model.named_parameters(remove_duplicate=False):
        names.setdefault(id(p), ("parameter", []))[1].append(fqn)
    for fqn, b in model.named_buffers(remove_duplicate=False):
        names.setdefault(id(b), ("buffer", []))[1].append(fqn)
    return {k: (kind, tuple(fqns)) for k, (kind, fqns) in names.items()}


def output_tensors(obj: Any, depth: int = 0):
    import torch

    if isinstance(obj, torch.Tensor):
        yield obj
    elif depth > 20:
        return
    elif isinstance(obj, dict):
        for v in obj.values():
            yield from output_tensors(v, depth + 1)
    elif isinstance(obj, (list, tuple)):
        for v in obj:
            yield from output_tensors(v, depth + 1)
    elif hasattr(obj, "to_tuple"):
        yield from output_tensors(obj.to_tuple(), depth + 1)


def is_training(model, args, kwargs) -> bool:
    import torch

    if any(p.requires_grad for p in (model.parameters() if hasattr(model, "parameters") else ())):
        return True
    return any(t.requires_grad for t in output_tensors((args, kwargs)) if isinstance(t, torch.Tensor))


def run_torch(name: str, backend: str) -> TorchRun:
    """Compile the model script ``models/NAME.py`` for real with ``backend`` and run it (forward, and
    backward in training), listening to torch's structured trace."""
    import torch
    import torch._functorch.config as functorch_config

    model, args, kwargs = load_script(model_path(name))
    training = is_training(model, args, kwargs)
    listener = TraceListener(tensor_names(model))
    error = None
    torch._dynamo.reset()
    quiet = [logging.getLogger(n) for n in ("torch._dynamo", "torch._inductor")]
    saved_levels = [lg.level for lg in quiet]
    for lg in quiet:  # graph-break and cudagraph-skip warnings: the listener keeps what it needs
        lg.setLevel(logging.ERROR)
    try:
        with listener, functorch_config.patch(enable_autograd_cache=False):
            try:
                out = torch.compile(model, backend=backend)(*args, **kwargs)
                if training:
                    leaves = [t for t in output_tensors(out) if t.requires_grad and t.grad_fn is not None]
                    if leaves:
                        torch.autograd.backward(leaves, [torch.ones_like(t) for t in leaves])
            except Exception as exc:  # the artifacts logged before it still count
                error = f"{type(exc).__name__}: {(str(exc).strip().splitlines() or [''])[0]}"
    finally:
        for lg, level in zip(quiet, saved_levels):
            lg.setLevel(level)
        torch._dynamo.reset()
    regions = [r for r in listener.regions.values() if r.graphs]
    return TorchRun(name, backend, training, regions, listener.breaks, listener.skip_notes, listener.metrics, error)


# ------------------------------------------------------------------ a whole training step, run as a loop runs it
_ATTRIBUTE_INPUT = re.compile(r"(?:Param|Buffer)AOTInput\(target='(?P<target>[^']+)'\)")
_GB_ID = re.compile(r"/gb/(?P<code>gb\d+)\.html")


@dataclass
class StepRegion:
    """One graph torch compiled while the step ran: its AOT graphs, and the tensors AOT's inputs are (by id)."""

    compile_id: str
    step: int  # the loop's step in which torch compiled it
    graphs: dict[str, str]
    after_joint_graph: str | None
    meta: MetaFacts | None
    input_ids: list[int | None]  # AOT's inputs in order (dynamo's placeholders and lifted attributes): id(tensor)


@dataclass
class StepRun:
    """What ``torch.compile(step)`` did over a loop of calls: no backward but the step's own."""

    regions: list[StepRegion]
    breaks: set[tuple[str, int | None, str | None]]  # (file name, line, gb id)
    skipped: set[str | None]  # co_name of every frame a compile failed on
    recompiles: list[tuple[int, str | None, str]]  # (step, co_name, torch's guard failure)
    names: dict[int, str]  # id(tensor) -> its name: `net.0.weight`, `opt.state[net.0.weight].exp_avg`
    error: str | None = None

    def mutated(self, region: StepRegion) -> set[str]:
        """The names of the inputs AOT's metadata says the graph writes (data)."""
        if region.meta is None:
            return set()
        return {self.names.get(i, f"?{i}") for i, info in zip(region.input_ids, region.meta.input_info) if info["mutates_data"]}


class _StepListener(TraceListener):
    """:class:`TraceListener` that also keeps, per compile, the id of every tensor behind its graph's inputs:
    dynamo's placeholders (``grapharg.example``) and the attributes of its graph (what a compiled optimizer
    reads: parameters and state) by name."""

    def __init__(self, module):
        super().__init__({})
        self.module = module
        self.ids: dict[str, tuple[list[int | None], dict[str, int]]] = {}
        self.seen_names: dict[int, str] = {}  # the script's tensors as each compile saw them (gradients come and go)
        self.step = 1
        self.steps: dict[str, int] = {}

    def emit(self, record: logging.LogRecord) -> None:
        meta = getattr(record, "metadata", None)
        if isinstance(meta, dict) and meta and next(iter(meta)) == "dynamo_output_graph":
            cid = _compile_id(meta) or "?"
            self.steps[cid] = self.step
            self.seen_names.update(script_tensor_names(self.module))
            f = sys._getframe()
            while f is not None and not (f.f_code.co_name == "compile_and_call_fx_graph" and "gm" in f.f_locals):
                f = f.f_back
            if f is not None:
                gm = f.f_locals["gm"]
                placeholders = [getattr(n.meta.get("grapharg"), "example", None) for n in gm.graph.nodes if n.op == "placeholder"]
                attrs = {k: id(v) for k, v in [*gm.named_parameters(remove_duplicate=False), *gm.named_buffers(remove_duplicate=False)]}
                self.ids[cid] = ([id(t) if t is not None else None for t in placeholders], attrs)
        super().emit(record)


def script_tensor_names(module) -> dict[int, str]:
    """id -> name for the tensors of a step script, read off its module-level objects alone: each module's
    parameters (``net.0.weight``) and their gradients (``net.0.weight.grad``), each optimizer's state
    (``opt.state[net.0.weight].exp_avg``)."""
    import torch

    names: dict[int, str] = {}
    for var, value in vars(module).items():
        if isinstance(value, torch.nn.Module):
            for fqn, p in value.named_parameters():
                names.setdefault(id(p), f"{var}.{fqn}")
                if p.grad is not None:
                    names.setdefault(id(p.grad), f"{var}.{fqn}.grad")
    for var, value in vars(module).items():
        if isinstance(value, torch.optim.Optimizer):
            for p, state in value.state.items():
                for key, t in state.items():
                    if isinstance(t, torch.Tensor):
                        names.setdefault(id(t), f"{var}.state[{names.get(id(p), '?')}].{key}")
    return names


def run_torch_steps(path: str, backend: str, steps: int = 3) -> StepRun:
    """``torch.compile(model, backend=B)`` of a step script's ``model``, called ``steps`` times with its
    example inputs and nothing else (the step runs its own backward and optimizer), torch's structured
    trace listened to."""
    import torch
    import torch._functorch.config as functorch_config

    model, args, kwargs = load_script(path)
    module = sys.modules[f"truth_model_{Path(path).stem}"]
    listener = _StepListener(module)
    error = None
    marks = []
    torch._dynamo.reset()
    quiet = [logging.getLogger(n) for n in ("torch._dynamo", "torch._inductor")]
    saved_levels = [lg.level for lg in quiet]
    for lg in quiet:
        lg.setLevel(logging.ERROR)
    try:
        with listener, functorch_config.patch(enable_autograd_cache=False):
            compiled = torch.compile(model, backend=backend)
            try:
                for step in range(1, steps + 1):
                    listener.step = step
                    compiled(*args, **kwargs)
                    marks.append(len(listener.metrics))
            except Exception as exc:
                error = f"{type(exc).__name__}: {(str(exc).strip().splitlines() or [''])[0]}"
    finally:
        for lg, level in zip(quiet, saved_levels):
            lg.setLevel(level)
        torch._dynamo.reset()
    names = {**listener.seen_names, **script_tensor_names(module)}
    regions = []
    for cid, r in listener.regions.items():
        if not r.graphs:
            continue
        text = r.graphs.get("aot_forward_graph") or r.graphs.get("aot_inference_graph") or ""
        placeholder_ids, attrs = listener.ids.get(cid, ([], {}))
        ids: list[int | None] = []
        for name, (role, idx) in placeholder_descriptors(text).items():
            line = next((ln for ln in text.split("\n") if ln.startswith(f"        {name}:")), "")
            attr = _ATTRIBUTE_INPUT.search(line)
            if role in ("plain", "view_base"):
                ids.append(placeholder_ids[idx] if idx is not None and idx < len(placeholder_ids) else None)
            elif attr is not None:
                ids.append(attrs.get(attr.group("target")))
        regions.append(StepRegion(cid, listener.steps.get(cid, 1), r.graphs, r.after_joint_graph, r.meta, ids))
    breaks = set()
    for b in listener.breaks:
        code = _GB_ID.search(b.payload)
        breaks.add((Path(b.file).name if b.file else None, b.line, code.group("code") if code else None))
    recompiles = []
    for i, m in enumerate(listener.metrics):
        if m.get("recompile_reason"):
            recompiles.append((1 + sum(1 for k in marks if i >= k), m.get("co_name"), str(m["recompile_reason"]).strip()))
    skipped = {m.get("co_name") for m in listener.metrics if m.get("fail_type")}
    return StepRun(regions, breaks, skipped, recompiles, names, error)
