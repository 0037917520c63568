"""The CUDA-graph verdict the GPU suite compares with torch, computed the way the CLI computes it."""

from __future__ import annotations


def cudagraphs_backend_verdict(script):
    """``graphtool cudagraphs SCRIPT --backend cudagraphs``'s verdict object: the model traced through
    the cudagraphs backend's own AOT graphs, judged by that backend's rules.

    Judging the inductor trace by the cudagraphs backend's rules (as tests/gpu once did) compares
    unlike things: inductor keeps input mutations in its graph (``keep_inference_input_mutations``),
    the cudagraphs backend does not, so a batch-norm buffer update or an ``add_`` on an input reads as
    a mutated input that torch's cudagraphs backend never sees (H100, torch 2.11: 0 skips on
    examples/convnet_bn.py and examples/mutate_input.py)."""
    from graphtool.analysis.cudagraphs.verdict import cudagraph_verdict
    from graphtool.commands.session import Session

    capture, accel, _ = Session(str(script)).standin_trace("cudagraphs", steps=1)
    return cudagraph_verdict(capture, backend="cudagraphs", predicted=accel == "meta")
