"""GPU ground truth for issue 35 (will it fit): the real training step's memory on a GPU, eager, compiled and
under reduce-overhead, at three activation-memory budgets.

  python memory_truth.py one CASE         one case, this process
  python memory_truth.py all OUT.jsonl    every case, each in a fresh process, one JSON row per case

A case is MODEL.MODE: MODEL one of tests/fixtures/fit/{mlp,decoder,cnn}.py (built under the CUDA device, with the
script's ``get_optimizer``); MODE ``eager``, ``default-B`` (``torch.compile(model)``) or ``ro-B``
(``mode="reduce-overhead"``), B the ``torch._functorch.config.activation_memory_budget`` (1.0, 0.5, 0.1) set
before compiling. The step: the forward, the loss (``out.loss`` where the model computes one, else the sum of the
first tensor output), ``backward()``, ``opt.step()``, ``opt.zero_grad(set_to_none=True)``. Five steps; the
first's peak (the optimizer's state is created in it) and the fifth's, phase by phase, the peak counter reset
before each phase: forward, backward, optimizer step. Bytes from ``torch.cuda.memory_allocated`` /
``max_memory_allocated`` / ``memory_reserved``; parameters, gradients and optimizer state counted from the tensors.
"""

from __future__ import annotations

import importlib.util
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from truth_common import device, emit, env_facts, error_text, main, pool_bytes, sync

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
MODELS = ["mlp", "decoder", "cnn"]
MODES = ["eager", "default-1.0", "default-0.5", "default-0.1", "ro-1.0", "ro-0.5", "ro-0.1"]
CASES = [f"{m}.{mode}" for m in MODELS for mode in MODES]


def load(name: str, dev: str):
    import torch

    path = os.path.join(ROOT, "tests", "fixtures", "fit", name + ".py")
    spec = importlib.util.spec_from_file_location("fit_" + name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    with torch.device(dev):
        got = mod.get_model_and_inputs()
    model, args = got[0], got[1]
    kwargs = got[2] if len(got) > 2 else {}
    model = model.to(dev)
    args = tuple(a.to(dev) if isinstance(a, torch.Tensor) else a for a in args)
    kwargs = {k: v.to(dev) if isinstance(v, torch.Tensor) else v for k, v in kwargs.items()}
    return model, args, kwargs, mod.get_optimizer(model), os.path.relpath(path, ROOT)


def loss_of(out):
    import torch

    if getattr(out, "loss", None) is not None:
        return out.loss, "out.loss"
    t = out if isinstance(out, torch.Tensor) else next(o for o in out if isinstance(o, torch.Tensor))
    return t.float().sum(), "sum of the output"


def tensor_bytes(ts) -> int:
    seen, total = set(), 0
    for t in ts:
        if t is None:
            continue
        key = (t.untyped_storage().data_ptr(), t.device)
        if key in seen:
            continue
        seen.add(key)
        total += t.untyped_storage().nbytes()
    return total


def run_one(case: str) -> None:
    import torch

    name, mode = case.split(".", 1)
    dev = device()
    cuda = torch.cuda.is_available()

    def mem():
        return (torch.cuda.memory_allocated(), torch.cuda.max_memory_allocated(), torch.cuda.memory_reserved()) \
            if cuda else (0, 0, 0)

    def reset():
        if cuda:
            torch.cuda.reset_peak_memory_stats()

    row = {"case": case, "model": name, "mode": mode, "env": env_facts(), "error": None}
    model, args, kwargs, opt, path = load(name, dev)
    row["script"] = path
    budget = None
    fn = model
    if mode != "eager":
        kind, b = mode.split("-")
        budget = float(b)
        torch._functorch.config.activation_memory_budget = budget
        torch._dynamo.reset()
        fn = torch.compile(model, mode="reduce-overhead") if kind == "ro" else torch.compile(model)
    row["budget"] = budget
    row["param_bytes"] = tensor_bytes(model.parameters())
    row["buffer_bytes"] = tensor_bytes(model.buffers())
    sync()
    row["allocated_before_step_1"] = mem()[0]
    try:
        for step in range(1, 6):
            reset()
            torch.compiler.cudagraph_mark_step_begin()
            start = mem()[0]
            out = fn(*args, **kwargs)
            loss, row["loss"] = loss_of(out)
            sync()
            after_fwd, fwd_peak, _ = mem()
            pool_fwd = pool_bytes()
            reset()
            loss.backward()
            sync()
            after_bwd, bwd_peak, _ = mem()
            pool_bwd = pool_bytes()
            row["grad_bytes"] = tensor_bytes(p.grad for p in model.parameters())
            out = loss = None
            sync()
            after_release, _, _ = mem()
            reset()
            opt.step()
            sync()
            after_opt, opt_peak, _ = mem()
            opt.zero_grad(set_to_none=True)
            sync()
            end, _, reserved = mem()
            phases = {"start": start, "forward_peak": fwd_peak, "after_forward": after_fwd, "backward_peak": bwd_peak,
                      "after_backward": after_bwd, "after_outputs_released": after_release, "optimizer_peak": opt_peak,
                      "after_optimizer": after_opt, "end": end, "reserved": reserved,
                      "step_peak": max(fwd_peak, bwd_peak, opt_peak), "pool_after_forward": pool_fwd,
                      "pool_after_backward": pool_bwd, "pool_end": pool_bytes()}
            if step == 1:
                row["step1"] = phases
            elif step == 5:
                row["step5"] = phases
        row["optimizer_state_bytes"] = tensor_bytes(v for st in opt.state.values() for v in st.values()
                                                    if isinstance(v, torch.Tensor))
    except Exception as e:
        row["error"] = error_text(e)
    if cuda:
        stats = torch.cuda.memory_stats()
        row["num_alloc_retries"] = stats.get("num_alloc_retries")
        row["num_ooms"] = stats.get("num_ooms")
    emit(row)


if __name__ == "__main__":
    main(os.path.abspath(__file__), CASES, run_one)
