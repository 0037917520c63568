"""The training step under ``mode="reduce-overhead"``: what stays outside cudagraph trees' private pool, and what
the pool reserves.

On the H200 (tests/truth/gpu/memory-h200-torch2.11.jsonl, pool-traces-h200-torch2.11.json.gz) a replayed step
allocates nothing in the pool: every graph's tensors live there, at the addresses the recording gave them. So:

* **outside the pool**: parameters, buffers, the input batch and the optimizer's state; in the backward also the
  tangents (the engine makes them, cudagraph trees copy them into the recording's static inputs: the loss's
  gradient, and zeros for every other differentiable output, the decoder's logits and key/value cache among
  them); in the optimizer's step its own peak (the gradients are in the pool). No cuBLAS workspace: it is
  allocated in the pool, per recorded graph.
* **the pool**: the segments the caching allocator reserved for the warm-up run (step 1) and the recording
  (step 2) of every forward and backward graph, simulated by :mod:`graphtool.analysis.memory.allocator` on this
  step's allocations and frees in order (the same walk as the compiled timeline), with the recording's copies of
  the input batch and of the tangents, and a cuBLAS workspace held from each graph's first matmul to its end.

The pool reserves more than the most bytes live in it at once (fragmentation: a freed 8 MiB block does not take a
16 MiB gradient); the simulation replays the GPU's own allocation traces exactly (tests/analysis/test_allocator.py),
so what remains between prediction and GPU is the allocation sequence: the ATen graphs here, inductor's fused
kernels there.
"""

from __future__ import annotations

from graphtool.analysis.memory.allocator import Allocator
from graphtool.analysis.memory.step_peak import walk

_MATMULS = ("mm", "addmm", "bmm", "baddbmm", "_scaled_mm")


def _matmul(node) -> bool:
    return getattr(node.target, "__name__", "").split(".")[0] in _MATMULS


class _Entry:
    """A block in the pool and how many hold it (a graph's live value, the forward's outputs, a backward's
    placeholder for a saved activation)."""

    __slots__ = ("block", "refs")

    def __init__(self, block):
        self.block, self.refs = block, 1


class _Run:
    """One run of the step's graphs on the pool: the warm-up (``record=False``) or the recording, whose static
    inputs (the input batch, the tangents) are copied into the pool and kept."""

    def __init__(self, alloc: Allocator, workspace: int, record: bool, walks: dict):
        self.a, self.workspace, self.record, self.walks = alloc, workspace, record, walks

    def release(self, entry) -> None:
        if entry is None:
            return
        entry.refs -= 1
        if entry.refs == 0 and entry.block is not None:
            self.a.free(entry.block)
            entry.block = None

    def graph(self, gm, held: set[str], given: dict, optimizer: bool = False) -> tuple[dict, list]:
        """Run ``gm``'s allocations and frees. Placeholders not in ``held`` come from ``given`` (name -> entry:
        the forward's saved activations) or are tangents. Returns its roots' entries and its outputs' entries
        (each output root once, one reference each, owned by the caller). ``optimizer``: an optimizer's step,
        fused as inductor fuses one (:func:`~graphtool.analysis.memory.step_peak.fused_away`)."""
        key = (id(gm), frozenset(held))  # the warm-up and the recording walk the same graphs
        if key not in self.walks:
            self.walks[key] = (walk(gm, held=held, fuse=True, optimizer=optimizer), {n.name: n for n in gm.graph.nodes})
        w, nodes = self.walks[key]
        live: dict[str, _Entry | None] = {}
        for p in w.placeholders:
            entry = given.get(p)
            if entry is None and self.record and p.startswith("tangents_"):
                self.a.malloc(w.size[p])  # the recording's static input: a copy of the tangent the tree keeps
            live[p] = entry
        ws = None
        for kind, node, r in w.events:
            if kind == "alloc":
                if ws is None and self.workspace and _matmul(nodes[node]):
                    ws = self.a.malloc(self.workspace)
                live[r] = _Entry(self.a.malloc(w.size[r])) if w.size.get(r) else None
            elif kind == "inplace":
                live[node] = live.pop(r, None)
            else:
                self.release(live.pop(r, None))
        if ws is not None:
            self.a.free(ws)
        outs = [live.get(r) for r in w.outputs if live.get(r) is not None]
        resolved = {n: live.get(w.root.get(n, n)) for n in nodes}
        return resolved, outs


def pool_reserved(graphs: list[tuple], *, inputs: int, workspace: int, after: list = ()) -> int:
    """Bytes cudagraph trees' pool reserves for a step of ``graphs`` ((forward, backward) per region, in order)
    and then of ``after`` (the graphs a whole training step compiles on the gradients: its optimizer's; their
    inputs are all the caller's or already in the pool): the warm-up run, then the recording (the input batch,
    ``inputs`` bytes, copied in first), each letting go of what the step lets go (the forward's outputs after the
    backward, the gradients at ``zero_grad``)."""
    a = Allocator()
    walks: dict = {}
    for record in (False, True):
        run = _Run(a, workspace, record, walks)
        if record and inputs:
            a.malloc(inputs)
        forwards = []
        for fw, _ in graphs:
            held = {n.name for n in fw.graph.nodes if n.op == "placeholder"}
            forwards.append(run.graph(fw, held, {}))
        grads = []
        for (_, bw), (made, outs) in reversed(list(zip(graphs, forwards))):
            if bw is not None:
                saved = {n.name: made.get(n.name) for n in bw.graph.nodes
                         if n.op == "placeholder" and not n.name.startswith("tangents_")}
                held = {k for k, v in saved.items() if v is None}  # parameters, inputs: outside the pool
                given = {k: v for k, v in saved.items() if v is not None}
                # AOT autograd clears the saved tensors before it calls the compiled backward, which frees each
                # after its last use: the backward holds the forward's reference
                grads += run.graph(bw, held, given)[1]
                taken = {id(v) for v in given.values()}
                outs = [e for e in outs if id(e) not in taken]
            for e in outs:  # the forward's other outputs (the loss): the loop drops them after the backward
                run.release(e)
        for gm in after:  # the optimizer's graphs: their temporaries in the pool, freed by their end
            for e in run.graph(gm, {n.name for n in gm.graph.nodes if n.op == "placeholder"}, {}, optimizer=True)[1]:
                run.release(e)
        for e in grads:  # zero_grad(set_to_none=True)
            run.release(e)
    return a.reserved
