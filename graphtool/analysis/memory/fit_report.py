"""``memory --fit`` / ``--budgets``: the training step's predicted peak, eager beside compiled, and what torch's
activation-memory budget trades.

For each budget the regions' joint graphs (recorded once, as the trace partitioned them) are partitioned again by
torch's own ``min_cut_rematerialization_partition`` with ``torch._functorch.config.activation_memory_budget`` set
(:func:`graphtool.capture.compat.partition_at_budget`): the saved set is the partitioner's, never imitated. Each
partition's forward and backward graphs go through :mod:`graphtool.analysis.memory.step_peak`'s timeline.
"""

from __future__ import annotations

import dataclasses
import types
from dataclasses import dataclass, field

from graphtool.analysis.memory.fit import Target, verdict
from graphtool.analysis.memory.saved import compiled_side, format_bytes, group
from graphtool.analysis.memory.step_graphs import StepGraphs, step_graphs
from graphtool.analysis.memory.step_peak import Timeline, _bytes, rounded, timeline, walk


@dataclass(frozen=True)
class Held:
    parameters: int
    gradients: int
    buffers: int
    inputs: int
    optimizer_state: int | None  # None: the script has no get_optimizer
    optimizer_step_peak: int | None  # the optimizer step's own peak (its state on the first step, temporaries)
    workspace: int  # CUDA library workspaces held through the allocator (cuBLAS), by the named GPU

    @property
    def steady(self) -> int:
        """What every phase of a later step starts with: parameters, buffers, inputs, optimizer state, workspaces."""
        return self.parameters + self.buffers + self.inputs + (self.optimizer_state or 0) + self.workspace

    def to_dict(self) -> dict:
        return {k: getattr(self, k) for k in ("parameters", "gradients", "buffers", "inputs", "optimizer_state",
                                               "optimizer_step_peak", "workspace")}


@dataclass(frozen=True)
class StepPeak:
    """One way of running the step: its phases' peaks (bytes), the whole step's, and where."""

    label: str  # eager | compiled | reduce-overhead | budget 0.5
    forward: int | None
    backward: int | None
    optimizer: int | None
    peak: int
    phase: str  # the phase that peaks
    pool: int | None = None  # reduce-overhead: the CUDA-graph pool's reserved bytes, in every phase above

    def to_dict(self) -> dict:
        return {"label": self.label, "forward": self.forward, "backward": self.backward, "optimizer": self.optimizer,
                "peak": self.peak, "phase": self.phase, "pool": self.pool}


def _phases(label: str, held: Held, forward: int | None, backward: int | None) -> StepPeak:
    optimizer = None
    if held.optimizer_step_peak is not None:
        optimizer = (held.parameters + held.buffers + held.inputs + held.gradients + held.workspace
                     + held.optimizer_step_peak)
    return _step(label, forward, backward, optimizer)


def _step(label: str, forward: int | None, backward: int | None, optimizer: int | None,
          pool: int | None = None) -> StepPeak:
    """A :class:`StepPeak` from its phases' peaks: the step's is the largest, named by its phase."""
    named = [(p, v) for p, v in (("forward", forward), ("backward", backward), ("optimizer", optimizer)) if v is not None]
    phase, peak = max(named, key=lambda x: x[1]) if named else ("", 0)
    return StepPeak(label, forward, backward, optimizer, peak, phase, pool)


@dataclass(frozen=True)
class BudgetPoint:
    budget: float
    saved_bytes: int  # activations saved for backward (storages once)
    saved_tensors: int
    saved: tuple[tuple[str, ...], ...]  # per region with a backward, the backward's saved placeholders in order
    recomputed_ops: int  # forward ops the backward runs again (views not counted)
    step: StepPeak
    rises: bool = False  # the peak is higher than at some larger budget: not monotonic
    fits: bool | None = None
    reduce_overhead: StepPeak | None = None
    region: int | None = None  # a region's own budget swept (region_activation_memory_budget); None: the global one

    def to_dict(self) -> dict:
        return {"budget": self.budget, "saved_activation_bytes": self.saved_bytes, "saved_tensors": self.saved_tensors,
                "recomputed_ops": self.recomputed_ops, "step": self.step.to_dict(), "not_monotonic": self.rises,
                "fits": self.fits,
                "reduce_overhead": self.reduce_overhead.to_dict() if self.reduce_overhead else None,
                "region": self.region}


@dataclass(frozen=True)
class Contributor:
    what: str
    bytes: int
    source: str | None = None  # the user's file:line

    def to_dict(self) -> dict:
        return {"what": self.what, "bytes": self.bytes, "source": self.source}


@dataclass(frozen=True)
class FitReport:
    held: Held
    eager: StepPeak | None
    compiled: StepPeak
    budgets: tuple[BudgetPoint, ...] = ()
    reduce_overhead: StepPeak | None = None
    region_budgets: tuple[BudgetPoint, ...] = ()  # each region with its own budget, that budget swept
    target: Target | None = None
    verdict: str | None = None
    fit_budget: float | None = None  # the largest swept budget whose compiled step fits the target
    contributors: tuple[Contributor, ...] = ()
    notes: tuple[str, ...] = field(default_factory=tuple)
    timeline: tuple = ()  # Point: the compiled step's live bytes node by node (thinned), then the optimizer's step

    def to_dict(self) -> dict:
        return {"held": self.held.to_dict(), "eager": self.eager.to_dict() if self.eager else None,
                "compiled": self.compiled.to_dict(),
                "reduce_overhead": self.reduce_overhead.to_dict() if self.reduce_overhead else None,
                "region_budgets": [b.to_dict() for b in self.region_budgets],
                "budgets": [b.to_dict() for b in self.budgets],
                "target": self.target.to_dict() if self.target else None, "verdict": self.verdict,
                "fit_budget": self.fit_budget, "contributors": [c.to_dict() for c in self.contributors],
                "notes": list(self.notes), "timeline": [p.to_dict() for p in self.timeline]}


# ---------------------------------------------------------------- the compiled step over a set of partitions


def _held_names(fw) -> set[str]:
    return {n.name for n in fw.graph.nodes if n.op == "placeholder"}


@dataclass(frozen=True)
class Point:
    """One point of the step's live-bytes timeline: after ``node`` of region ``region``'s ``phase`` graph ran."""

    phase: str  # forward | backward | optimizer
    region: int | None
    node: str
    bytes: int

    def to_dict(self) -> dict:
        return {"phase": self.phase, "region": self.region, "node": self.node, "bytes": self.bytes}


def compiled_step(label: str, held: Held, steps: StepGraphs) -> tuple[StepPeak, list[Timeline], list[Point]]:
    """The phases of a step that runs ``steps`` (:class:`~graphtool.analysis.memory.step_graphs.StepGraphs`: the
    model's regions' forwards in order, their backwards in reverse, then the graphs the step compiles on the
    gradients, its optimizer's), and its live-bytes timeline: the device's bytes after each node, what the caller
    holds included. A step whose optimizer is not compiled (a model with ``get_optimizer``) gets the measured
    optimizer step (:func:`_phases`)."""
    fw_lines = []
    forward, made = 0, 0
    points: list[Point] = []
    for i, fw, _ in steps.model:
        tl = timeline(fw, held=_held_names(fw))
        fw_lines.append(tl)
        forward = max(forward, held.steady + made + tl.peak)
        points += [Point("forward", i, name, held.steady + made + b) for name, b in tl.series]
        made += tl.end
    backward, grads = 0, 0
    bw_lines = []
    for i, fw, bw in reversed(steps.model):
        if bw is None:
            continue
        tl = timeline(bw, held=_held_names(fw))
        bw_lines.append(tl)
        saved = tl.start - tl.tangents
        base = held.steady + (made - saved) + grads
        backward = max(backward, base + tl.peak)
        points += [Point("backward", i, name, base + b) for name, b in tl.series]
        made -= saved
        grads += tl.end
    if not steps.optimizer:
        step = _phases(label, held, forward if steps.model else None, backward if bw_lines else None)
        if step.optimizer is not None:
            points.append(Point("optimizer", None, "optimizer.step()", step.optimizer))
        return step, fw_lines + bw_lines, points
    # the step's own optimizer, compiled: its graphs read the gradients the backward made (or, with no compiled
    # backward, the ones the eager backward made) while the step's outputs (the loss) are still held
    base = held.steady + (grads if bw_lines else held.gradients) + sum(_kept(fw, bw) for _, fw, bw in steps.model)
    optimizer = base
    opt_lines = []
    for i, gm in steps.optimizer:
        tl = timeline(gm, held=_held_names(gm), fuse=True, optimizer=True)  # in place, as inductor compiles it
        opt_lines.append(tl)
        optimizer = max(optimizer, base + tl.peak)
        points += [Point("optimizer", i, name, base + b) for name, b in tl.series]
        if not tl.series:  # nothing allocated (all in place): its first and last nodes, so the picture has the phase
            ran = [n.name for n in gm.graph.nodes if n.op not in ("placeholder", "output")] or ["optimizer.step()"]
            points += [Point("optimizer", i, name, base) for name in dict.fromkeys((ran[0], ran[-1]))]
        base += tl.end
    step = _step(label, forward if steps.model else None, backward if bw_lines else None, optimizer)
    return step, fw_lines + bw_lines + opt_lines, points


def _kept(fw, bw) -> int:
    """Bytes of ``fw``'s outputs still held once ``bw`` (None: no backward) ran: each storage once, but those the
    backward took (the saved activations, freed inside it): the user's outputs (the loss)."""
    w = walk(fw, held=_held_names(fw))
    taken = set() if bw is None else {w.root.get(n.name, n.name) for n in bw.graph.nodes
                                      if n.op == "placeholder" and not _tangent(n)}
    out = next(n for n in fw.graph.nodes if n.op == "output")
    kept = {w.root.get(a.name, a.name) for a in out.all_input_nodes} - taken
    return sum(w.size.get(r, 0) for r in kept)


def reduce_overhead_step(held: Held, steps: StepGraphs) -> StepPeak:
    """The step under ``mode="reduce-overhead"`` (:mod:`graphtool.analysis.memory.pool_step`): outside the pool
    the parameters, buffers, inputs and optimizer state, the tangents in the backward and, when the optimizer is not
    compiled, its own peak in its step (the gradients, the cuBLAS workspaces and a compiled optimizer's temporaries
    are in the pool); the pool's reserved bytes in every phase."""
    from graphtool.analysis.memory.pool_step import pool_reserved

    graphs = steps.pairs
    pool = pool_reserved(graphs, inputs=held.inputs, workspace=held.workspace // 2,
                         after=[gm for _, gm in steps.optimizer])
    tangents = sum(_bytes(n.meta.get("val")) for _, bw in graphs if bw is not None  # each storage rounded
                   for n in bw.graph.nodes if n.op == "placeholder" and _tangent(n))
    base = held.parameters + held.buffers + held.inputs
    forward = base + (held.optimizer_state or 0) + pool
    backward = forward + tangents if steps.trained else None
    if steps.optimizer:
        optimizer = forward
    else:
        optimizer = base + held.optimizer_step_peak + pool if held.optimizer_step_peak is not None else None
    return _step("reduce-overhead", forward if graphs else None, backward, optimizer, pool)


def thinned(points: list[Point], most: int = 240) -> tuple[Point, ...]:
    """At most ``most`` points, in order: the largest of each run of neighbours, so every peak survives.

    >>> pts = [Point("forward", 0, f"n{i}", b) for i, b in enumerate([1, 5, 2, 2, 9, 1])]
    >>> [p.bytes for p in thinned(pts, most=3)]
    [5, 2, 9]
    """
    if len(points) <= most:
        return tuple(points)
    step = -(-len(points) // most)
    return tuple(max(points[k:k + step], key=lambda p: p.bytes) for k in range(0, len(points), step))


def budget_sweep(capture, records: list, budgets, held: Held, target: Target | None,
                 only: int | None = None) -> tuple[BudgetPoint, ...]:
    """Each budget's partition of every region with a backward (their joint graphs in ``records``, in order): the
    global ``activation_memory_budget``, which a region's own budget overrides. With ``only``, region ``only``'s own
    ``region_activation_memory_budget`` is swept instead and the other regions keep the trace's partition. The
    step is the whole step each time: the regions without a backward and the optimizer's graphs as traced."""
    from graphtool.capture import compat

    steps = step_graphs(capture)
    regions = [r for r in capture.regions if r.backward is not None and r.forward is not None]
    points = []
    for b in budgets:
        partitions, replaced = {}, []
        for i, (region, record) in enumerate(zip(regions, records)):
            if only is None:
                fw, bw = compat.partition_at_budget(record, b)
            elif i == only:
                fw, bw = compat.partition_at_budget(record, b, region=True)
            else:
                fw, bw = region.forward, region.backward
            partitions[region.index] = (fw, bw)
            replaced.append(dataclasses.replace(region, forward=fw, backward=bw))
        graphs = steps.partitioned(partitions)
        side, _, recomputed, _ = compiled_side(types.SimpleNamespace(regions=replaced))
        step, _, _ = compiled_step(f"budget {b:g}", held, graphs)
        saved = tuple(tuple(n.name for n in bw.graph.nodes if n.op == "placeholder" and not _tangent(n))
                      for _, bw in partitions.values())
        points.append(BudgetPoint(b, side.by_kind["activation"][0], side.by_kind["activation"][1], saved,
                                  sum(1 for r in recomputed if not r.view), step,
                                  fits=(step.peak <= target.bytes) if target else None,
                                  reduce_overhead=reduce_overhead_step(held, graphs), region=only))
    ordered = sorted(points, key=lambda p: -p.budget)
    lowest, rising = None, set()
    for p in ordered:
        if lowest is not None and p.step.peak > lowest:
            rising.add(p.budget)
        lowest = p.step.peak if lowest is None else min(lowest, p.step.peak)
    return tuple(dataclasses.replace(p, rises=p.budget in rising) for p in points)


def _tangent(node) -> bool:
    return node.name.startswith("tangents_")


def contributors(report, held: Held, step: StepPeak, n: int = 3, *, own_optimizer: bool = False) -> tuple[Contributor, ...]:
    """The biggest parts of the step's peak: parameters, gradients, optimizer state (the script's
    ``get_optimizer``'s, or with ``own_optimizer`` the step's own), and the saved activations of each of the user's
    lines (compiled)."""
    state = "optimizer state" if own_optimizer else "optimizer state (get_optimizer)"
    parts = [Contributor("parameters", held.parameters), Contributor(state, held.optimizer_state or 0)]
    if step.phase != "forward":
        parts.append(Contributor("gradients", held.gradients))
    if step.phase != "optimizer":
        for g in group(report.eager, report.compiled, "line"):
            if g.compiled_bytes:
                parts.append(Contributor("activations saved at", g.compiled_bytes, g.key))
    parts = [p for p in parts if p.bytes]
    parts.sort(key=lambda p: -p.bytes)
    return tuple(parts[:n])


def build_fit_report(report, capture, records: list, *, held: Held, eager_peak: int | None,
                     budgets=(), target: Target | None = None, own_step=None) -> FitReport:
    """The fit of a traced step. ``eager_peak``: bytes made at the peak of an eager forward and backward (a model
    whose optimizer, if any, is the script's ``get_optimizer``); ``own_step``, instead, a step that runs its own
    backward and optimizer, run eagerly as written
    (:class:`~graphtool.capture.memory.live_bytes.OwnStepPeaks`)."""
    steps = step_graphs(capture)
    compiled, _, points = compiled_step("compiled", held, steps)
    ro = reduce_overhead_step(held, steps) if steps.trained else None
    eager = _phases("eager", held, None, held.steady + eager_peak) if eager_peak is not None else None
    if own_step is not None:
        eager = _step("eager", None, None if own_step.backward is None else held.steady + own_step.backward,
                      None if own_step.optimizer is None else held.steady + own_step.optimizer)
    notes = []
    if eager is not None:
        notes.append("eager: one peak for forward and backward together (a live-bytes count of the eager run)"
                     + ("; the step run once as written, its optimizer's phase from its step() to its end"
                        if own_step is not None else ""))
    elif report.eager_not_measured:
        notes.append(f"eager: not measured ({report.eager_not_measured})")
    elif getattr(capture, "own_step", None) is not None and capture.training:
        notes.append("eager: not measured: the step raised when graphtool ran it once as written")
    if steps.optimizer:
        notes.append("optimizer: " + ", ".join(f"region {i}" for i, _ in steps.optimizer)
                     + " is the step's own optimizer, compiled: it runs after the backward, on the gradients, and "
                       "inductor writes the parameters and the optimizer's state in place (no temporaries counted)")
    budget_points = budget_sweep(capture, records, budgets, held, target) if budgets else ()
    if any(p.rises for p in budget_points):
        notes.append("the peak is not monotonic in the budget: a smaller budget costs more memory at "
                     + ", ".join(f"{p.budget:g}" for p in budget_points if p.rises))
    region_points: tuple[BudgetPoint, ...] = ()
    if budgets:
        from graphtool.capture import compat

        own = [(i, compat.region_budget_of(r.joint)) for i, r in enumerate(records)]
        own = [(i, b) for i, b in own if b is not None]
        if own:
            notes.append("the sweep sets torch._functorch.config.activation_memory_budget, which "
                         + ", ".join(f"region {i}'s own budget {b!r}" for i, b in own)
                         + " (torch.autograd.graph.region_activation_memory_budget) overrides, as in torch; "
                           "the region's own sweep sets that one (as if the model entered the region with it)")
            region_points = tuple(p for i, _ in own for p in budget_sweep(capture, records, budgets, held, target,
                                                                            only=i))
    if target is not None and target.gpu is None:
        notes.append("a size, not a GPU name: no CUDA library workspace is counted (a named Hopper GPU counts "
                     "2 x 32 MiB of cuBLAS workspace)")
    fit_budget = None
    if target is not None and budget_points:
        fitting = [p.budget for p in budget_points if p.fits]
        fit_budget = max(fitting) if fitting else None
    line = verdict(compiled.peak, target) if target is not None else None
    if line is not None and eager is not None:
        line += f"; eager {format_bytes(eager.peak)}"
    if line is not None and ro is not None:
        line += f"; reduce-overhead {format_bytes(ro.peak)}"
        if ro.peak > target.bytes:
            line += f" does not fit (over by {format_bytes(ro.peak - target.bytes)}: its CUDA-graph pool)"
    if target is not None and budget_points and compiled.peak > target.bytes:
        line += (f"; fits at activation_memory_budget {fit_budget:g}" if fit_budget is not None
                 else "; no swept budget makes it fit")
    return FitReport(held, eager, compiled, budget_points, ro, region_points, target, line, fit_budget,
                     contributors(report, held, compiled, own_optimizer=own_step is not None), tuple(notes),
                     thinned(points))


def held_bytes(spec, report, optimizer: tuple[int, int] | None, target: Target | None) -> Held:
    from graphtool.capture.user.input_names import all_named_inputs

    inputs, seen = 0, set()
    for _, t in all_named_inputs(spec):
        key = id(t.untyped_storage()) if t.device.type == "meta" else t.untyped_storage().data_ptr()
        if key not in seen:
            seen.add(key)
            inputs += rounded(t.untyped_storage().nbytes())
    workspace = 2 * target.gpu.cublas_workspace if target is not None and target.gpu is not None else 0
    return Held(report.parameters.bytes, report.gradients.bytes, report.buffers.bytes, inputs,
                optimizer[0] if optimizer else None, optimizer[1] if optimizer else None, workspace)
