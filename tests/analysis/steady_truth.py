"""torch's own count of a loop's compiled graphs and recompiles, on the CPU: a real ``torch.compile`` loop.

:func:`torch_loop` loads a model script with graphtool's loader, compiles it with a backend that runs dynamo's
graphs through AOT autograd and no code generation (``backend="aot_eager"``: dynamo decides the graphs and the
guards, and AOT traces each one as inductor and the cudagraphs backend do, so a graph AOT cannot trace fails the
same way: a custom op whose backward reads ``.tolist()``, transformers 5.17's ``grouped_mm_fallback``, makes dynamo
run that frame eagerly and compile its callees instead, 6 graphs where ``backend="eager"`` compiles 1), and runs
``steps`` steps as the GPU truth did (every ``.grad = None``, the forward, ``.backward()`` in training).
It counts what torch counts: ``counters["stats"]["unique_graphs"]`` and the "Recompiling function" records of
torch's ``recompiles`` log, each with torch's guard-failure text."""

from __future__ import annotations

import logging
from dataclasses import dataclass


@dataclass
class LoopTruth:
    graphs: int
    recompiles: list[str]  # torch's recompile log records, one per recompile


class _Keep(logging.Handler):
    def __init__(self):
        super().__init__(level=logging.DEBUG)
        self.messages: list[str] = []

    def emit(self, record):
        msg = record.getMessage()
        if "Recompiling function" in msg:
            self.messages.append(msg)


def torch_loop(path: str, steps: int, *, inference: bool = False, backend: str = "aot_eager") -> LoopTruth:
    import torch
    from torch._dynamo.utils import counters

    from graphtool.capture.tensors import iter_tensors
    from graphtool.capture.user.script import load_model

    spec = load_model(path)
    params = list(spec.model.parameters()) if hasattr(spec.model, "parameters") else []
    training = not inference and (any(p.requires_grad for p in params)
                                  or any(t.requires_grad for t in iter_tensors((spec.args, spec.kwargs))))
    torch._dynamo.reset()
    counters.clear()
    keep = _Keep()
    logger = logging.getLogger("torch._dynamo")
    torch._logging.set_logs(recompiles=True)
    logger.addHandler(keep)
    try:
        compiled = torch.compile(spec.model, backend=backend)
        for _ in range(steps):
            for t in params:
                t.grad = None
            with torch.no_grad() if not training else torch.enable_grad():
                out = compiled(*spec.args, **spec.kwargs)
            if training:
                first = next(t for t in iter_tensors(out) if t.requires_grad)
                first.sum().backward()
    finally:
        logger.removeHandler(keep)
        torch._logging.set_logs()
    return LoopTruth(int(counters["stats"]["unique_graphs"]), keep.messages)
