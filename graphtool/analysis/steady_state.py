"""The steady state of a loop: what dynamo compiles and what cudagraph trees record, step by step.

From a stand-in trace run for several steps (:mod:`graphtool.capture.steady_state`) and the CUDA-graph
verdict of its graphs, this replays what cudagraph trees do with each call (``torch/_inductor/
cudagraph_trees.py``, the same for ``backend="cudagraphs"``):

- every CUDA-graphed piece (a partition inductor CUDA-graphs, or the whole graph) is one function, and
  one more per set of integer inputs it gets (a dynamic size: ``cudagraphify_impl``'s ``fn_cache``);
- a function's first call is a warm-up, run eagerly (and, once one warm-up ran, the rest of that step);
- after that each call records a CUDA graph the first time it is reached at its place in the step's
  path (a region called k times in a step is k recordings), and replays it afterwards;
- the memory pool's creation is one more ``torch.cuda.graph`` capture, once, when the first function
  reaches the trees (run-time skips included: the trees check them);
- with ``triton.cudagraph_capture_sizes`` set, a call whose integer inputs are not listed runs the compiled
  graph without CUDA graphs, before the trees see it (``cudagraphify_impl``: the key is ``None`` without
  integer inputs, the integer itself with one, their tuple with several; a graph with no dynamic size has the
  key ``None``, never in the list, so it is never CUDA-graphed).

The loop is steady when its last step compiled no graph and recorded no CUDA graph; a graph recorded
again in every step is the worst case for ``mode="reduce-overhead"``.

Example::

    >>> from graphtool.analysis.cudagraphs.verdict import cudagraph_verdict
    >>> from graphtool.capture.standin.meta import to_meta
    >>> from graphtool.capture.user.script import load_model
    >>> from graphtool.capture.tracer import trace_model
    >>> cap = trace_model(to_meta(load_model("examples/mlp.py")), standin=True, steps=3)
    >>> s = steady_state(cap, cudagraph_verdict(cap))
    >>> [(f.step, f.warmups, f.recordings, f.replays) for f in s.per_step], s.steady_from
    ([(1, 2, 0, 0), (2, 0, 2, 0), (3, 0, 0, 2)], 3)
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class StepFacts:
    """One step of the loop."""

    step: int
    graphs_compiled: int  # graphs dynamo compiled in this step (2+: recompiles)
    recompiles: tuple  # capture.steady_state.Recompile
    calls: int  # compiled graphs run (forward, backward, inference)
    warmups: int  # CUDA-graphed functions run eagerly the first time
    recordings: int  # CUDA graphs recorded (each also runs once)
    replays: int  # recorded CUDA graphs replayed
    skipped_calls: int  # calls of graphs torch skips (run without a CUDA graph)
    uncaptured: int = 0  # calls whose sizes are not in triton.cudagraph_capture_sizes (run without a CUDA graph)
    recorded: tuple = ()  # (region, graph, ints) of each CUDA graph recorded in this step, in order

    def to_dict(self) -> dict:
        return {"step": self.step, "graphs_compiled": self.graphs_compiled, "recompiles": len(self.recompiles),
                "calls": self.calls, "warmups": self.warmups, "recordings": self.recordings, "replays": self.replays,
                "skipped_calls": self.skipped_calls, "uncaptured": self.uncaptured}


@dataclass(frozen=True)
class SteadyState:
    steps: int
    per_step: tuple[StepFacts, ...]
    graphs_compiled: int  # every graph dynamo compiled, recompiles included (torch's unique_graphs)
    functions_graphed: int  # distinct CUDA-graphed functions recorded (one per piece and set of sizes)
    recordings: int  # every CUDA graph recorded over the steps
    rerecords: int  # recordings of a piece already recorded (another size, or another place in the path)
    pool_capture: bool  # the trees' memory pool was made: one more torch.cuda.graph capture
    steady_from: int | None  # the first step from which nothing more is compiled or recorded; None: still growing
    failed: str | None = None  # a later step raised: the steps before it are reported
    last_step_rerecords: int = 0  # of the last step's recordings, those of a piece already recorded
    # Python numbers compiled into a graph as constants and guarded on (capture.steady_state.ValueGuard): the
    # steps ran with the same value each time, and a loop whose value changes compiles again
    value_guards: tuple = ()

    @property
    def captures(self) -> int:
        """Every ``torch.cuda.graph`` capture torch enters over the steps: recordings, and the pool's."""
        return self.recordings + int(self.pool_capture)

    @property
    def recompiles(self) -> int:
        """Frames dynamo compiled again over the steps (a guard failed): the loop's recompiles."""
        return sum(len(f.recompiles) for f in self.per_step)

    @property
    def graphs_run_last_step(self) -> int:
        last = self.per_step[-1] if self.per_step else None
        return (last.recordings + last.replays) if last else 0

    def assumption(self) -> str | None:
        """What the steady state takes for granted: each number dynamo compiled into a graph keeps its value.

        >>> from graphtool.capture.steady_state import ValueGuard
        >>> s = SteadyState(3, (), 2, 0, 0, 0, False, 3, value_guards=(ValueGuard("pos", 8, "/nowhere/kv.py", 23),))
        >>> s.assumption()  # doctest: +ELLIPSIS
        'assumes the same value every step for pos at /nowhere/kv.py:23: dynamo compiled it into the graph ...'
        """
        if not self.value_guards:
            return None
        from graphtool.display_paths import display_path

        named = []
        for g in self.value_guards:
            where = f"{display_path(g.file)}:{g.line}" if g.file and g.line else None
            if g.handed_over:  # the resume frame's code is the file of the line that broke
                what = "the number read before the graph break" + (
                    f" at line {g.read_at}" if g.read_at else "") + (f", used at {where}" if where else "")
            else:
                what = g.name + (f" at {where}" if where else "")
            named.append(what)
        one = len(named) == 1
        return (f"assumes the same value every step for {'; '.join(named)}: dynamo compiled {'it' if one else 'each'} into "
                f"the graph as a constant and guards on {'it' if one else 'its value'}, so a step with another value "
                "compiles again")

    def summary(self) -> str:
        text = self._summary()
        said = self.assumption()
        return text + f"; {said}" if said else text

    def _summary(self) -> str:
        from graphtool.text import count

        extra = f" ({count(self.recompiles, 'recompile')})" if self.recompiles else ""
        head = (f"over {count(self.steps, 'step')}: dynamo compiled {count(self.graphs_compiled, 'graph')}"
                f"{extra}, cudagraph trees record "
                f"{count(self.recordings, 'CUDA graph')} of {count(self.functions_graphed, 'function')}")
        if self.failed:
            return head + f"; the loop stopped: {self.failed} (a loop running this step again would fail the same way)"
        if self.steps < 2:
            return head + "; run --steps 3 or more to see the steady state"
        if self.steady_from is None:
            last = self.per_step[-1]
            what = []
            if last.graphs_compiled:
                what.append(f"compiles {count(last.graphs_compiled, 'graph')}")
            if last.recordings:
                what.append(f"records {count(last.recordings, 'CUDA graph')}")
            if last.graphs_compiled or self.last_step_rerecords:
                return (head + f"; NOT STEADY: step {last.step} still {' and '.join(what)} "
                        "(a re-record every step is the worst case for reduce-overhead)")
            # first recordings after an earlier step's warm-up (inputs that alternate between steps): not a re-record
            return (head + f"; not steady yet: step {last.step} still {' and '.join(what or ['warms up'])} for the first "
                    f"time; run --steps {self.steps + 2} to see whether it settles")
        return head + f"; steady from step {self.steady_from}: {count(self.graphs_run_last_step, 'CUDA graph')} replayed per step"

    def step_line(self, f: StepFacts) -> str:
        """``step 2: compiled 1 graph, 2 CUDA graphs recorded, 1 replayed``."""
        from graphtool.text import count

        bits = []
        if f.graphs_compiled:
            bits.append(f"compiled {count(f.graphs_compiled, 'graph')}")
        for n, word, plural in ((f.warmups, "warm-up", None), (f.recordings, "CUDA graph recorded", "CUDA graphs recorded"),
                                (f.replays, "CUDA graph replayed", "CUDA graphs replayed"),
                                (f.skipped_calls, "skipped graph run", None)):
            if n:
                bits.append(count(n, word, plural))
        return f"step {f.step}: " + (", ".join(bits) if bits else "nothing compiled or graphed")

    def to_dict(self) -> dict:
        return {
            "steps": self.steps,
            "graphs_compiled": self.graphs_compiled,
            "recompiles": [r.to_dict() for f in self.per_step for r in f.recompiles],
            "functions_graphed": self.functions_graphed,
            "recordings": self.recordings,
            "rerecords": self.rerecords,
            "captures": self.captures,
            "steady": self.steady_from is not None and self.failed is None,
            "failed": self.failed,
            "steady_from": self.steady_from,
            "per_step": [f.to_dict() for f in self.per_step],
            "value_guards": [g.to_dict() for g in self.value_guards],
            "summary": self.summary(),
        }


def _pieces(verdict) -> dict[tuple[int, str], list[int]]:
    """(region, graph) -> the indices of its CUDA-graphed partitions (the whole graph's 0 without partitioning)."""
    out: dict[tuple[int, str], list[int]] = {}
    for p in verdict.partitions:
        out.setdefault((p.region, p.graph), [])
        if p.cudagraphed:
            out[(p.region, p.graph)].append(p.index)
    return out


def _skipped(verdict) -> tuple[set, set]:
    """The (region, graph) pairs torch skips, and those of them it skips at run time (inside the trees)."""
    skipped, at_run_time = set(), set()
    for r in verdict.reasons:
        if r.skips and r.region is not None:
            skipped.add((r.region, r.graph))
            if "checked at run time" in r.message:
                at_run_time.add((r.region, r.graph))
    return skipped, at_run_time


def capture_key(ints: tuple):
    """The key ``cudagraphify_impl`` checks against ``triton.cudagraph_capture_sizes``.

    >>> capture_key(()), capture_key((17,)), capture_key((2, 17))
    (None, 17, (2, 17))
    """
    return None if not ints else ints[0] if len(ints) == 1 else tuple(ints)


def _symbol_masks(capture) -> dict:
    """(region, graph) -> for each integer input of the graph, whether it is a size symbol itself (``s0``) rather
    than one derived from others (``2*s0``, which a partition may save for the backward)."""
    from graphtool.analysis.cudagraphs.pool import region_graphs, size_symbols

    return {(r.index, name): [sym is not None for sym in size_symbols(gm)]
            for r in capture.regions for name, gm in region_graphs(r)}


def _bound_ints(call, masks: dict) -> tuple:
    """The call's integer inputs that are size symbols themselves: the H200's compiled backward of a decoder got
    the length alone where the stand-in's graph also takes twice it (tests/truth/gpu, 2026-11-27), and keyed its
    CUDA graphs by the length."""
    mask = masks.get((call.region, call.graph))
    if not mask or len(mask) != len(call.ints) or not any(mask):
        return call.ints
    return tuple(v for v, keep in zip(call.ints, mask) if keep)


def steady_state(capture, verdict, capture_sizes=None) -> SteadyState | None:
    """Replay the calls of ``capture.steps`` through cudagraph trees' rules; None without a step log.
    ``capture_sizes``: ``triton.cudagraph_capture_sizes`` (None: every size is CUDA-graphed)."""
    log = getattr(capture, "steps", None)
    if log is None:
        return None
    pieces = _pieces(verdict)
    skipped, at_run_time = _skipped(verdict)
    masks = _symbol_masks(capture) if capture_sizes is not None else {}
    warmed: set = set()
    tree: dict = {}  # (parent node, function) -> node
    recorded_pieces: set = set()
    functions: set = set()
    rerecords = 0
    pool = False
    per_step = []
    for step in range(1, log.steps + 1):
        calls = [c for c in log.calls if c.step == step]
        node, in_warmup = None, False
        warm = record = replay = skip = step_rerecords = uncaptured = 0
        recorded = []
        for call in calls:
            key = (call.region, call.graph)
            if key in skipped or not pieces.get(key):
                skip += key in skipped
                pool = pool or key in at_run_time
                continue
            if capture_sizes is not None and capture_key(_bound_ints(call, masks)) not in capture_sizes:
                uncaptured += 1
                continue
            for index in pieces[key]:
                fid = (call.region, call.graph, index, call.ints)
                pool = True
                if fid not in warmed or in_warmup:
                    warmed.add(fid)
                    in_warmup = True
                    warm += 1
                    continue
                child = tree.get((node, fid))
                if child is None:
                    child = tree[(node, fid)] = len(tree) + 1
                    record += 1
                    recorded.append((call.region, call.graph, call.ints))
                    functions.add(fid)
                    piece = fid[:3]
                    rerecords += piece in recorded_pieces
                    step_rerecords += piece in recorded_pieces
                    recorded_pieces.add(piece)
                else:
                    replay += 1
                node = child
        compiled = sum(1 for s in log.region_steps if s == step)
        recompiles = tuple(r for r in log.recompiles if r.step == step)
        per_step.append(StepFacts(step, compiled, recompiles, len(calls), warm, record, replay, skip, uncaptured,
                                  tuple(recorded)))
    steady_from = None
    for f in reversed(per_step):
        if f.graphs_compiled or f.recordings or f.warmups:
            break
        steady_from = f.step
    return SteadyState(
        steps=log.steps, per_step=tuple(per_step), graphs_compiled=len(log.region_steps), functions_graphed=len(functions),
        recordings=sum(f.recordings for f in per_step), rerecords=rerecords, pool_capture=pool, steady_from=steady_from,
        failed=log.failed, last_step_rerecords=step_rerecords if per_step else 0, value_guards=_value_guards(capture),
    )


def _value_guards(capture) -> tuple:
    """Every region's value guards, each number and the line that uses it once (a recompiled region guards again)."""
    seen: dict = {}
    for region in getattr(capture, "regions", ()):
        for g in getattr(region, "value_guards", ()):
            seen.setdefault((g.name, g.file, g.line, g.read_at), g)
    return tuple(seen.values())
