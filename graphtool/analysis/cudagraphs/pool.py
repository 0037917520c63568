"""What each recorded CUDA graph holds in cudagraph trees' memory pool, from the traced graphs.

A recording's outputs are allocated in the trees' private pool and stay there while they live: right after
recording a forward, all its outputs (the user's outputs and, in training, the activations saved for backward);
right after recording a backward, its outputs (the gradients) and the forward's user outputs still held, the
saved activations freed. Each tensor is rounded to the caching allocator's 512-byte blocks, its storage counted
once. A graph with a dynamic size is evaluated at the sizes the recorded call got (its integer inputs).

Checked against ``torch.cuda.memory_snapshot()``'s private-pool segments right after each recording
(tests/truth/gpu/shapes_truth.py's ``recorded``), on an H200: equal to the byte for the decoder in inference
(logits and key/value cache) and the CNN; docs/gpu-results.md says where it differs.

The pool's reserved bytes are not this: the trees also run warm-ups in the pool, and cuBLAS takes its workspace
there (32 MiB on Hopper); segments are 2 MiB and 20 MiB. Reserved is measured, never predicted here.
"""

from __future__ import annotations

from graphtool.capture.memory.live_bytes import rounded


def _concrete(value, subs: dict) -> int | None:
    if isinstance(value, int):
        return value
    node = getattr(value, "node", None)
    expr = getattr(node, "expr", None)
    if expr is None:
        return None
    try:
        done = expr.xreplace(subs)
        return int(done) if done.is_number else None
    except Exception:
        return None


def _tensor_bytes(t, subs: dict) -> int | None:
    try:
        n = t.untyped_storage().nbytes()
    except Exception:
        n = None
    if n is None:
        numel = _concrete(t.numel(), subs)
        return None if numel is None else rounded(numel * t.element_size())
    got = _concrete(n, subs)
    return None if got is None else rounded(got)


def size_symbols(gm) -> list:
    """For each integer input of ``gm``, in order (the integers a call of it gets): its size symbol (``s0``), or None
    where it is derived from others (``2*s0``, which a partition may save for the backward) or a plain int."""
    import torch

    holders = [n.meta.get("val") for n in gm.graph.nodes if n.op == "placeholder"]
    out = []
    for v in holders:
        if isinstance(v, (int, torch.SymInt)) and not isinstance(v, bool):
            expr = getattr(getattr(v, "node", None), "expr", None)
            out.append(expr if expr is not None and getattr(expr, "is_Symbol", False) else None)
    return out


def region_graphs(region) -> list[tuple[str, object]]:
    """``(graph, GraphModule)`` of a region as its calls name them: ``inference`` or ``forward``, then ``backward``."""
    pairs = [("inference" if region.inference else "forward", region.forward), ("backward", region.backward)]
    return [(name, gm) for name, gm in pairs if gm is not None]


def _substitution(gm, ints: tuple) -> dict:
    """The graph's size symbols bound to the call's integer inputs."""
    return {sym: got for sym, got in zip(size_symbols(gm), ints) if sym is not None}


def _outputs(gm) -> list:
    out = next((n for n in gm.graph.nodes if n.op == "output"), None)
    if out is None:
        return []
    vals = out.args[0] if out.args else ()
    return [a.meta.get("val") if hasattr(a, "meta") else None for a in (vals if isinstance(vals, (list, tuple)) else [vals])]


def _bytes_of(vals, subs: dict) -> int | None:
    """Storage bytes of the tensors among ``vals``, each storage once; None when a size cannot be evaluated."""
    import torch

    seen: set = set()
    total = 0
    for v in vals:
        if not isinstance(v, torch.Tensor):
            continue
        try:
            key = id(v.untyped_storage())
        except Exception:
            key = id(v)
        if key in seen:
            continue
        seen.add(key)
        got = _tensor_bytes(v, subs)
        if got is None:
            return None
        total += got
    return total


def _saved_count(region) -> int:
    """How many of the forward's outputs are saved for backward: the backward's non-tangent placeholders."""
    if region.backward is None:
        return 0
    return sum(1 for n in region.backward.graph.nodes if n.op == "placeholder" and not n.name.startswith("tangents"))


def recording_bytes(capture, region_index: int, graph: str, ints: tuple) -> tuple[int | None, int | None]:
    """``(own, pool_live)`` for one recording: the bytes of the graph's outputs at ``ints``, and what lives in
    the pool right after recording it (a backward: its outputs and the forward's user outputs). None where a
    graph is not in the capture or a size does not evaluate."""
    region = next((r for r in capture.regions if r.index == region_index), None)
    if region is None:
        return None, None
    gm = region.backward if graph == "backward" else region.forward
    if gm is None:
        return None, None
    own = _bytes_of(_outputs(gm), _substitution(gm, ints))
    if graph != "backward" or region.forward is None or own is None:
        return own, own
    fw_outs = _outputs(region.forward)
    user = fw_outs[: max(0, len(fw_outs) - _saved_count(region))]
    # the forward's sizes: its own integer inputs are the backward's symbols, bound the same way
    held = _bytes_of(user, _substitution(gm, ints))
    return own, None if held is None else own + held
