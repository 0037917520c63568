"""What torch does over a shape schedule, step by step and in total, and what to change.

From a stand-in trace run over a schedule (:mod:`graphtool.capture.schedule`): every graph dynamo compiled,
with the guard failure that made it recompile and the dimensions it turned symbolic; the step where the
frame passed ``recompile_limit`` and new sizes run eagerly (silently, in a real run); and, replayed through
cudagraph trees' rules (:mod:`graphtool.analysis.steady_state`: a size's first call is a warm-up, its second
records, later ones replay), the CUDA graphs ``mode="reduce-overhead"`` records per distinct size, against
``cudagraph_dynamic_shape_warn_limit``.

Example::

    >>> step = ShapeStep(step=1, sizes={"input_ids:1": 17}, graphs_compiled=1, recompiles=(), symbolic=(),
    ...                  eager=False, warmups=2, recordings=0, replays=0)
    >>> ShapeReport.step_line(step)
    'step 1  input_ids:1=17  compiled 1 graph, 2 warm-ups'
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class ShapeStep:
    """One step of the schedule."""

    step: int
    sizes: dict  # "input_ids:1" -> 17: the dimensions that vary over the schedule
    graphs_compiled: int
    recompiles: tuple  # torch's guard failures, one per recompile in this step
    symbolic: tuple  # "input_ids:1": dimensions a graph compiled in this step takes as symbolic
    eager: bool | str  # no compiled graph ran: "limit" (past recompile_limit) or the stance; False: compiled
    warmups: int
    recordings: int
    replays: int
    settled: bool = False  # a signature seen before with nothing compiled since: its calls repeated, not re-run
    uncaptured: int = 0  # compiled calls run without CUDA graphs: their sizes are not in cudagraph_capture_sizes
    # per recording: (graph, bytes of its outputs, bytes live in the pool right after it); None: not evaluated
    pool: tuple = ()
    values: dict = field(default_factory=dict)  # "pos" -> 9: the plain int/float inputs that vary over the schedule

    def to_dict(self) -> dict:
        return {"step": self.step, "sizes": dict(self.sizes), "values": dict(self.values), "graphs_compiled": self.graphs_compiled,
                "recompiles": list(self.recompiles), "symbolic": list(self.symbolic), "eager": bool(self.eager),
                "eager_why": ("recompile_limit" if self.eager == "limit" else self.eager) or None, "warmups": self.warmups,
                "recordings": self.recordings, "replays": self.replays, "settled": self.settled,
                "uncaptured": self.uncaptured,
                "pool": [{"graph": g, "output_bytes": own, "pool_live_bytes": live} for g, own, live in self.pool]}


@dataclass(frozen=True)
class Advice:
    """A change and what the prediction says it does, re-run over the changed schedule (``checked``)."""

    kind: str  # "pad" | "mark_dynamic" | "capture_sizes" | "scalar_input"
    text: str
    checked: dict
    predicted: bool = True  # False: a change to the model's code, which graphtool cannot predict again for it

    def to_dict(self) -> dict:
        return {"kind": self.kind, "text": self.text, "checked": dict(self.checked), "predicted": self.predicted}


@dataclass(frozen=True)
class ScalarInput:
    """A plain int or float input whose value changes over the schedule (a decode loop's ``pos``): dynamo compiles
    its first value in as a constant, then (automatic dynamic) takes it as an integer input of the graph, and
    cudagraph trees record one CUDA graph per value, as they do per size."""

    name: str
    type: str  # "int" | "float"
    distinct: int  # distinct values over the steps
    every_step: bool  # no two consecutive steps share a value
    graph_input: str | None = None  # "region 1's inference graph": the first graph that takes it as an integer input

    def to_dict(self) -> dict:
        return {"name": self.name, "type": self.type, "distinct": self.distinct, "every_step": self.every_step,
                "graph_input": self.graph_input}


@dataclass(frozen=True)
class ShapeReport:
    steps: int
    source: str
    backend: str
    per_step: tuple[ShapeStep, ...]
    graphs_compiled: int
    recompiles: int
    recompile_limit: int | None
    limit_step: int | None  # the step where dynamo stopped compiling the frame (recompile_limit)
    eager_steps: int
    distinct_sizes: int
    functions_recorded: int
    recordings: int
    replays: int
    captures: int
    warnings: tuple[str, ...] = ()
    settings: dict = field(default_factory=dict)
    left_out: str | None = None
    failed: str | None = None
    advice: tuple[Advice, ...] = ()
    mode: str = "training"  # how the steps ran: training (a backward each step) or inference
    mode_why: str | None = None  # what decided it: --inference, the grad mode the schedule yields in, the model's flag
    scalars: tuple = ()  # ScalarInput: the plain int/float inputs whose value changes over the schedule

    @property
    def graphed_steps(self) -> int:
        """Steps that run a CUDA graph (record or replay one) rather than warming up or running eagerly."""
        return sum(1 for s in self.per_step if s.recordings or s.replays)

    @property
    def pool_peak(self) -> tuple[int, int] | None:
        """(bytes, step): the most cudagraph trees' pool holds right after a recording, from the traced graphs."""
        best = None
        for s in self.per_step:
            for _g, _own, live in s.pool:
                if live is not None and (best is None or live > best[0]):
                    best = (live, s.step)
        return best

    @property
    def stance(self) -> str:
        return str(self.settings.get("stance", "default"))

    @property
    def symbolic(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(d for s in self.per_step for d in s.symbolic))

    def counts(self) -> str:
        """What changes over the steps: the distinct sizes of the tensor inputs (which dimensions), and each plain number
        input that changes (``pos``), apart, since cudagraph trees count both as "sizes" of a graph.

        >>> r = ShapeReport(11, "s", "inductor", (ShapeStep(1, {"x:1": 8}, 1, (), (), False, 1, 0, 0),), 2, 1, 8, None, 0,
        ...                 2, 0, 0, 0, 0, scalars=(ScalarInput("pos", "int", 10, True),))
        >>> r.counts()
        '2 distinct sizes of x:1; pos takes 10 values, a new one every step'
        """
        from graphtool.text import count

        keys = list(dict.fromkeys(k for s in self.per_step for k in s.sizes))
        text = count(self.distinct_sizes, "distinct size") + (f" of {', '.join(keys)}" if keys else "")
        for v in self.scalars:
            text += f"; {v.name} takes {count(v.distinct, 'value')}" + (", a new one every step" if v.every_step else "")
        return text

    def headline(self) -> str:
        from graphtool.text import count

        text = (f"over {count(self.steps, 'step')} ({self.counts()}): dynamo compiled "
                f"{count(self.graphs_compiled, 'graph')} ({count(self.recompiles, 'recompile')}); "
                f"cudagraph trees record {count(self.recordings, 'CUDA graph')} of "
                f"{count(self.functions_recorded, 'function')}; {self.graphed_steps} of {self.steps} steps run CUDA graphs")
        if self.symbolic:
            text += f"; symbolic: {', '.join(self.symbolic)}"
        peak = self.pool_peak
        if peak is not None:
            from graphtool.analysis.memory.saved import format_bytes

            sizes = next((s.sizes for s in self.per_step if s.step == peak[1]), {})
            at = " ".join(f"{k}={v}" for k, v in sizes.items())
            text += f"; the pool holds up to {format_bytes(peak[0])} of recorded outputs (step {peak[1]}{', ' + at if at else ''})"
        uncaptured = sum(s.uncaptured for s in self.per_step)
        if uncaptured:
            text += (f"; {count(uncaptured, 'compiled call')} outside cudagraph_capture_sizes "
                     f"{list(self.settings.get('cudagraph_capture_sizes') or ())} run without CUDA graphs")
        return text

    def loud(self) -> str | None:
        """The worst silent case, said loudly: the frame runs eagerly past ``recompile_limit`` (or under a stance
        that never recompiles)."""
        if self.limit_step is None:
            if self.eager_steps and self.stance == "force_eager":
                return (f"EAGER under torch.compiler.set_stance(\"force_eager\"): {self.eager_steps} of {self.steps} "
                        "steps run eagerly: the stance skips every compiled graph, with no error")
            if self.eager_steps and self.stance != "default":
                return (f"EAGER under torch.compiler.set_stance(\"{self.stance}\"): {self.eager_steps} of {self.steps} "
                        "steps run eagerly, uncompiled, with no error: their sizes were never compiled (mark the size "
                        "dynamic or pad, so that the graphs compiled before the stance cover them)")
            return None
        return (f"RECOMPILE LIMIT HIT at step {self.limit_step}: torch._dynamo hit config.recompile_limit "
                f"({self.recompile_limit}); {self.eager_steps} of {self.steps} steps run EAGERLY, uncompiled, "
                "with no error (raise torch._dynamo.config.recompile_limit, mark the size dynamic, or pad)")

    def summary(self) -> str:
        bits = [self.headline()]
        for extra in (self.loud(), self.failed and f"the loop fails: {self.failed}", self.left_out):
            if extra:
                bits.append(extra)
        return "; ".join(bits)

    @staticmethod
    def step_line(s: ShapeStep) -> str:
        from graphtool.text import count

        sizes = " ".join(f"{k}={v}" for k, v in [*s.sizes.items(), *s.values.items()])
        bits = []
        if s.graphs_compiled:
            bits.append(f"compiled {count(s.graphs_compiled, 'graph')}")
        if s.symbolic:
            bits.append(f"symbolic {', '.join(s.symbolic)}")
        bits += ShapeReport.run_bits(s)
        return f"step {s.step}  {sizes}  " + (", ".join(bits) if bits else "nothing compiled or graphed")

    @staticmethod
    def run_bits(s: ShapeStep) -> list[str]:
        """How the step ran, for every view of it: eagerly, warm-ups, CUDA graphs recorded (and what each leaves in
        the pool) and replayed, compiled calls outside ``cudagraph_capture_sizes``.

        >>> ShapeReport.run_bits(ShapeStep(5, {}, 0, (), (), False, 0, 2, 1, pool=(("forward", 9, 4096), ("backward", 1, 1024))))
        ['2 recorded (pool holds 4.0 KiB after the forward, 1.0 KiB after the backward)', '1 replayed']
        """
        from graphtool.text import count

        bits = []
        if s.eager:
            bits.append("EAGER (past recompile_limit)" if s.eager == "limit" else f"EAGER ({s.eager})")
        if s.warmups:
            bits.append(count(s.warmups, "warm-up"))
        if s.recordings:
            recorded = f"{s.recordings} recorded"
            held = [(g, live) for g, _own, live in s.pool if live is not None]
            if held:
                from graphtool.analysis.memory.saved import format_bytes

                if len(held) == 1:
                    recorded += f" (pool holds {format_bytes(held[0][1])} after)"
                else:
                    recorded += " (pool holds " + ", ".join(f"{format_bytes(b)} after the {g}" for g, b in held) + ")"
            bits.append(recorded)
        if s.replays:
            bits.append(f"{s.replays} replayed")
        if s.uncaptured:
            bits.append(f"{s.uncaptured} without CUDA graphs (size not in cudagraph_capture_sizes)")
        return bits

    def to_dict(self) -> dict:
        return {
            "steps": self.steps, "source": self.source, "backend": self.backend, "mode": self.mode, "mode_why": self.mode_why,
            "left_out": self.left_out,
            "graphs_compiled": self.graphs_compiled, "recompiles": self.recompiles,
            "recompile_limit": self.recompile_limit, "limit_step": self.limit_step, "eager_steps": self.eager_steps,
            "distinct_sizes": self.distinct_sizes, "symbolic": list(self.symbolic),
            "functions_recorded": self.functions_recorded, "recordings": self.recordings, "replays": self.replays,
            "captures": self.captures, "graphed_steps": self.graphed_steps, "warnings": list(self.warnings), "settings": dict(self.settings),
            "failed": self.failed, "advice": [a.to_dict() for a in self.advice],
            "scalars": [v.to_dict() for v in self.scalars],
            "per_step": [s.to_dict() for s in self.per_step], "summary": self.summary(),
        }


#: ``torch.compiler.set_stance`` stances under which a size dynamo has not compiled runs eagerly
EAGER_STANCES = ("eager_on_recompile", "force_eager")


def run_mode(capture, *, asked_inference: bool = False, grad_modes=()) -> tuple[str, str]:
    """``(mode, why)``: whether the steps ran as training (a backward each step) or inference, and what decided it,
    as trace decides it: ``--inference``, else the grad mode the model is called in (here, where the schedule yields
    each step: a ``with torch.no_grad():`` around the yields), else whether anything requires grad; the model's own
    ``train()``/``eval()`` flag is named beside it.

    >>> from types import SimpleNamespace as C
    >>> run_mode(C(training=True, grad_enabled=True, module_training=False), grad_modes=[False, False])
    ('inference', 'the schedule yields every step with gradients off (torch.no_grad()); the model is in eval()')
    >>> run_mode(C(training=True, grad_enabled=True, module_training=True), grad_modes=[True])[0]
    'training'
    >>> run_mode(C(training=True, grad_enabled=True, module_training=None), asked_inference=True, grad_modes=[True])
    ('inference', 'asked for with --inference')
    """
    flag = getattr(capture, "module_training", None)
    model = {True: "; the model is in train()", False: "; the model is in eval()"}.get(flag, "")
    grad_modes = list(grad_modes or ())
    off = sum(1 for g in grad_modes if not g)
    if asked_inference:
        return "inference", "asked for with --inference" + model
    if grad_modes and off == len(grad_modes):
        return "inference", "the schedule yields every step with gradients off (torch.no_grad())" + model
    if not getattr(capture, "training", True) or not getattr(capture, "grad_enabled", True):
        return "inference", "nothing the model computes requires grad" + model
    why = "gradients are on where the schedule yields its steps" if grad_modes else "gradients are on"
    if off:
        why += f" ({off} of {len(grad_modes)} steps are yielded with them off, predicted as training too)"
    if flag is False:
        why += ("; the model is in eval() yet its output requires grad: a serving loop runs it under torch.no_grad() "
                "(or pass --inference)")
    return "training", why + (model if flag is not False else "")


def shape_report(capture, verdict, *, labels: list, source: str, settings: dict, backend: str = "inductor",
                 symbolic: dict | None = None, left_out: str | None = None, asked_inference: bool = False,
                 grad_modes=(), values: list | None = None) -> ShapeReport:
    """The report of one stand-in run over a schedule (``labels``: each step's varying sizes; ``grad_modes`` and
    ``asked_inference``: what decided training or inference, :func:`run_mode`; ``values``: each step's plain number
    inputs that vary, ``{"pos": 9}``)."""
    from graphtool.analysis.cudagraphs.pool import recording_bytes
    from graphtool.analysis.steady_state import steady_state
    from graphtool.capture.graph_breaks import hit_recompile_limit

    log = capture.steps
    values = values or []
    steady = steady_state(capture, verdict, capture_sizes=settings.get("cudagraph_capture_sizes"))
    stance = str(settings.get("stance", "default"))
    symbolic = symbolic or {}
    limit = settings.get("recompile_limit")
    limit_step = next((step for step, _kind, reason in log.frame_failures if hit_recompile_limit(reason)), None)
    called = {c.step for c in log.calls}
    settled = set(log.settled_steps)
    steps = []
    for f in steady.per_step:
        new_regions = [r for r in capture.regions if r.step == f.step]
        sym = tuple(dict.fromkeys(d for r in new_regions for d in symbolic.get(r.index, ())))
        eager: bool | str = False
        if f.step not in called:
            if limit_step is not None and f.step >= limit_step:
                eager = "limit"
            elif stance in EAGER_STANCES:
                eager = f"set_stance {stance}"
        pool = tuple((graph,) + recording_bytes(capture, region, graph, ints) for region, graph, ints in f.recorded)
        steps.append(ShapeStep(f.step, labels[f.step - 1] if f.step - 1 < len(labels) else {}, f.graphs_compiled,
                               tuple(r.reason for r in f.recompiles), sym, eager, f.warmups, f.recordings, f.replays,
                               f.step in settled, f.uncaptured, pool, values[f.step - 1] if f.step - 1 < len(values) else {}))
    failed = steady.failed
    backend_failure = None if failed else _cudagraphs_backend_failure(log, symbolic, backend)
    if backend_failure is not None:  # the steps after the failing one do not run
        stop, failed = backend_failure
        steps = [s for s in steps if s.step <= stop]
    distinct = len({tuple(sorted(s.sizes.items())) for s in steps})
    mode, why = run_mode(capture, asked_inference=asked_inference, grad_modes=grad_modes)
    inputs = int_input_labels(capture)
    return ShapeReport(
        steps=len(steps), source=source, backend=backend, per_step=tuple(steps), graphs_compiled=steady.graphs_compiled,
        recompiles=len(log.recompiles), recompile_limit=limit, limit_step=limit_step,
        eager_steps=sum(1 for s in steps if s.eager), distinct_sizes=distinct,
        functions_recorded=steady.functions_graphed, recordings=sum(s.recordings for s in steps),
        replays=sum(s.recordings + s.replays for s in steps), captures=steady.captures,
        warnings=tuple(_size_warnings(log, settings, verdict, inputs) + _capture_size_warnings(log, settings, verdict)),
        settings=dict(settings), left_out=left_out, failed=failed,
        mode=mode, mode_why=why, scalars=_scalar_inputs(steps, inputs),
    )


def int_input_labels(capture) -> dict:
    """(region, graph) -> for each integer input of the graph, what it stands for as the report names inputs: ``pos``
    (an int argument), ``input_ids:1`` (a size of an input), or None."""
    from graphtool.analysis.cudagraphs.pool import region_graphs
    from graphtool.capture import compat

    return {(r.index, name): [input_label(src) if src else None for src in compat.int_input_sources(gm)]
            for r in capture.regions for name, gm in region_graphs(r)}


def input_label(source: str) -> str:
    """A dynamo source as the schedule names an input: ``pos``, ``x:1`` for a size; the source itself otherwise.

    >>> input_label("L['pos']"), input_label("L['x'].size()[1]"), input_label("L['kwargs']['input_ids'].size()[1]")
    ('pos', 'x:1', 'input_ids:1')
    >>> input_label("L['self'].cache.size()[0]")
    "L['self'].cache.size()[0]"
    """
    import re

    m = re.fullmatch(r"L\['(?:kwargs|args)'\]\[['\"]?(\w+)['\"]?\](.*)|L\['(\w+)'\](.*)", source)
    if not m:
        return source
    name, rest = (m.group(1), m.group(2)) if m.group(1) else (m.group(3), m.group(4))
    if not rest:
        return name
    size = re.fullmatch(r"\.size\(\)\[(\d+)\]", rest)
    return f"{name}:{size.group(1)}" if size else source


def _scalar_inputs(steps: list, inputs: dict) -> tuple:
    """Each plain number input whose value varies over the steps, with the first graph taking it as an integer input."""
    names = list(dict.fromkeys(k for s in steps for k in s.values))
    out = []
    for name in names:
        seq = [s.values[name] for s in steps if name in s.values]
        graph = next((f"region {region}'s {graph} graph" for (region, graph), labels in sorted(inputs.items())
                      if name in labels), None)
        kind = "float" if any(isinstance(v, float) for v in seq) else "int"
        out.append(ScalarInput(name, kind, len(set(seq)), all(a != b for a, b in zip(seq, seq[1:])), graph))
    return tuple(out)


def scalar_advice(report: ShapeReport) -> list[Advice]:
    """For an int input whose value is new most steps (a decode loop's ``pos``): each value is a new CUDA graph, so
    keep the shapes and integers fixed. Not predicted again: it is a change to the model's code.

    >>> r = ShapeReport(9, "s", "inductor", (), 2, 1, 8, None, 0, 2, 0, 0, 0, 0,
    ...                 scalars=(ScalarInput("pos", "int", 9, True, "region 1's inference graph"),))
    >>> scalar_advice(r)[0].text.split(":")[0]
    'pos changes every step (9 values)'
    """
    out = []
    for v in report.scalars:
        if v.type != "int" or v.distinct < max(3, report.steps // 2):
            continue
        how = "every step" if v.every_step else "in most steps"
        cost = (f"it is an integer input of {v.graph_input}, and cudagraph trees keep one CUDA graph per value (a value "
                "seen once is only warmed up, never replayed)" if v.graph_input else
                "dynamo compiles each value into the graph as a constant, so each value compiles again")
        out.append(Advice("scalar_input", (
            f"{v.name} changes {how} ({v.distinct} values): {cost}; keep every step's shapes and integers the same: a "
            f"fixed-size cache attended whole with the positions past {v.name} masked out, and {v.name} passed as a "
            f"tensor on the device (the new keys written with index_copy_, as transformers' StaticCache does with "
            "cache_position), so that one CUDA graph serves every step"), {}, predicted=False))
    return out


def _size_warnings(log, settings: dict, verdict, inputs: dict | None = None) -> list[str]:
    """cudagraph trees' "We have observed N distinct sizes" warning: a CUDA-graphed graph called with more
    distinct integer inputs than ``cudagraph_dynamic_shape_warn_limit``, and the step it first says so; ``inputs``
    (:func:`int_input_labels`) names what those integers are, since torch's "sizes" include a plain int's values."""
    limit = settings.get("cudagraph_dynamic_shape_warn_limit")
    if not limit:
        return []
    graphed = {(p.region, p.graph) for p in verdict.partitions if p.cudagraphed}
    seen: dict = {}
    out = []
    for c in log.calls:
        key = (c.region, c.graph)
        if key not in graphed:
            continue
        sizes = seen.setdefault(key, set())
        if c.ints not in sizes:
            sizes.add(c.ints)
            if len(sizes) == limit + 1:
                named = [n for n in dict.fromkeys((inputs or {}).get(key) or ()) if n]
                what = (f" (its integer input{'s' if len(named) > 1 else ''}: {', '.join(named)})" if named else "")
                out.append(f"step {c.step}: region {c.region}'s {c.graph} graph reaches {limit + 1} distinct sizes{what}, past "
                           f"cudagraph_dynamic_shape_warn_limit ({limit}): torch warns \"We have observed {limit + 1} "
                           "distinct sizes\" and records one CUDA graph per size")
    return out


def _capture_size_warnings(log, settings: dict, verdict) -> list[str]:
    """``cudagraph_capture_sizes`` set, and a CUDA-graphed graph with no integer input: its key is None, never in
    the list, so torch never CUDA-graphs it (``cudagraph_trees.py``: ``is_cudagraph_capture_sizes``), silently."""
    sizes = settings.get("cudagraph_capture_sizes")
    if sizes is None:
        return []
    graphed = {(p.region, p.graph) for p in verdict.partitions if p.cudagraphed}
    static = sorted({(c.region, c.graph) for c in log.calls if not c.ints and (c.region, c.graph) in graphed})
    return [f"region {region}'s {graph} graph has no dynamic size: its key is None, never in cudagraph_capture_sizes "
            f"{list(sizes)}, so torch never CUDA-graphs it (mark the size dynamic to graph only the listed sizes)"
            for region, graph in static]


def _cudagraphs_backend_failure(log, symbolic: dict, backend: str) -> tuple[int, str] | None:
    """``backend="cudagraphs"`` keeps one CUDA graph per compiled graph, whatever its sizes: a graph with a
    symbolic size fails once it is called at a size other than its first call's (seen on an H200 and an H100,
    torch 2.11: ``RuntimeError: The size of tensor a (64) must match the size of tensor b (128)``)."""
    if backend != "cudagraphs":
        return None
    first: dict = {}
    for c in log.calls:
        if not symbolic.get(c.region):
            continue
        ints = first.setdefault((c.region, c.graph), c.ints)
        if ints != c.ints:
            return c.step, (f"step {c.step} fails: backend=\"cudagraphs\" keeps one CUDA graph for region {c.region}'s "
                            f"{c.graph} graph, which takes a symbolic size, and it is called at {list(c.ints)} after "
                            f"{list(ints)} (RuntimeError: the size of tensor a must match the size of tensor b)")
    return None


def bucket_sizes(values: list[int], bucket: int) -> list[int]:
    """Each size rounded up to a multiple of ``bucket``.

    >>> bucket_sizes([17, 33, 64, 7], 32)
    [32, 64, 64, 32]
    """
    return [-(-v // bucket) * bucket for v in values]


def padding_waste(values: list[int], bucket: int) -> float:
    """The padded elements as a share of the real ones along the padded dimension.

    >>> round(padding_waste([17, 33, 64, 7], 32), 3)
    0.587
    """
    real = sum(values)
    return (sum(bucket_sizes(values, bucket)) - real) / real if real else 0.0


def choose_bucket(values: list[int], *, most: int = 8) -> int | None:
    """The smallest power-of-two bucket (8 or more) that leaves at most ``most`` distinct padded sizes; None
    when the sizes are already that few.

    >>> choose_bucket([17, 33, 64, 128, 200, 7, 48, 96, 256, 80])
    32
    """
    if len(set(values)) <= most:
        return None
    bucket = 8
    while len(set(bucket_sizes(values, bucket))) > most:
        bucket *= 2
    return bucket
