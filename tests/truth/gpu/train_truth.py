"""GPU ground truth for issue 30: a whole training step (forward, loss, ``backward()``, the optimizer's step and
``zero_grad``) compiled with ``torch.compile(step, mode="reduce-overhead")``, as people compile it.

  python train_truth.py one CASE         one case, this process
  python train_truth.py all OUT.jsonl    every case, each in a fresh process, one JSON row per case

Each case: a 3-layer MLP (or a tiny GPT) and an optimizer built on the device, the step compiled, 5 calls,
each after ``torch.compiler.cudagraph_mark_step_begin()``; a case with a scheduler steps it between calls,
outside the compiled step, as training loops do. After calls 1, 3 and 5: the graphs dynamo compiled
(``unique_graphs``), the graph breaks by torch's reason, frames compiled and skipped, recompiles with their guard
failures, CUDA-graph recordings and replays, the functions cudagraph trees recorded, ``cudagraph_skips`` and
the logged skip messages, and the allocator's bytes. Also which optimizer state tensors exist (names, bytes)
and the loss of each call (so a run that went wrong shows).
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from truth_common import Counting, device, emit, env_facts, error_text, main, sync

CASES = [
    "sgd_momentum",
    "adam_foreach",
    "adamw_foreach",
    "adamw_fused",
    "grad_accum",
    "clip_grad_norm",
    "sched_float_lr",
    "sched_tensor_lr",
    "opt_step_only",
    "tiny_gpt_adamw",
]


def build(case: str, dev: str):
    import torch
    from torch import nn

    torch.manual_seed(0)
    if case == "tiny_gpt_adamw":
        class TinyGPT(nn.Module):
            def __init__(self, vocab=100, d=64, n_layer=2, n_head=4, block=16):
                super().__init__()
                self.tok = nn.Embedding(vocab, d)
                self.pos = nn.Embedding(block, d)
                layer = nn.TransformerEncoderLayer(d, n_head, 4 * d, dropout=0.0, batch_first=True, norm_first=True)
                self.blocks = nn.TransformerEncoder(layer, n_layer, enable_nested_tensor=False)
                self.head = nn.Linear(d, vocab)

            def forward(self, idx, tgt):
                t = idx.shape[1]
                x = self.tok(idx) + self.pos(torch.arange(t, device=idx.device))
                mask = nn.Transformer.generate_square_subsequent_mask(t, device=idx.device)
                x = self.blocks(x, mask=mask, is_causal=True)
                logits = self.head(x)
                return nn.functional.cross_entropy(logits.view(-1, logits.size(-1)), tgt.view(-1))

        net = TinyGPT().to(dev)
        inputs = (torch.randint(0, 100, (4, 16), device=dev), torch.randint(0, 100, (4, 16), device=dev))
    else:
        class Mlp(nn.Module):
            def __init__(self):
                super().__init__()
                self.l1, self.l2, self.l3 = nn.Linear(64, 128), nn.Linear(128, 128), nn.Linear(128, 10)

            def forward(self, x, y):
                h = torch.relu(self.l2(torch.relu(self.l1(x))))
                return nn.functional.cross_entropy(self.l3(h), y)

        net = Mlp().to(dev)
        inputs = (torch.randn(32, 64, device=dev), torch.randint(0, 10, (32,), device=dev))
    params = net.parameters()
    if case == "sgd_momentum":
        opt = torch.optim.SGD(params, lr=0.01, momentum=0.9)
    elif case == "adam_foreach":
        opt = torch.optim.Adam(params, lr=1e-3, foreach=True)
    elif case == "adamw_fused":
        opt = torch.optim.AdamW(params, lr=1e-3, fused=True)
    elif case == "sched_tensor_lr":
        opt = torch.optim.AdamW(params, lr=torch.tensor(1e-3))  # foreach=True refuses a tensor lr unless capturable
    else:
        opt = torch.optim.AdamW(params, lr=1e-3, foreach=True)
    sched = None
    if case in ("sched_float_lr", "sched_tensor_lr"):
        sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: 1.0 / (1 + s))
    return net, opt, sched, inputs


def run_one(case: str) -> None:
    import torch

    dev = device()
    counting = Counting()
    row = {"case": case, "env": env_facts(), "mode": "reduce-overhead", "calls": [], "error": None}
    net, opt, sched, inputs = build(case, dev)
    row["trace_autograd_ops_exists"] = hasattr(torch._dynamo.config, "trace_autograd_ops")

    if case == "grad_accum":
        def step(x, y):
            half = x.shape[0] // 2
            loss1 = net(x[:half], y[:half]) / 2
            loss1.backward()
            loss2 = net(x[half:], y[half:]) / 2
            loss2.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            return loss1 + loss2
    elif case == "clip_grad_norm":
        def step(x, y):
            loss = net(x, y)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(net.parameters(), 1.0)
            opt.step()
            opt.zero_grad(set_to_none=True)
            return loss
    elif case == "opt_step_only":
        step = None
    else:
        def step(x, y):
            loss = net(x, y)
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            return loss

    torch._dynamo.reset()
    from torch._dynamo.utils import counters

    counters.clear()
    if step is None:
        compiled_step = torch.compile(opt.step, mode="reduce-overhead")

        def call(x, y):
            loss = net(x, y)
            loss.backward()
            compiled_step()
            opt.zero_grad(set_to_none=True)
            return loss
    else:
        compiled = torch.compile(step, mode="reduce-overhead")

        def call(x, y):
            return compiled(x, y)

    try:
        for i in range(1, 6):
            before = counting.replays
            torch.compiler.cudagraph_mark_step_begin()
            loss = call(*inputs)
            loss_value = float(loss.detach())
            sync()
            if sched is not None:
                sched.step()
            if i in (1, 3, 5):
                snap = counting.snapshot()
                snap.update(call=i, replays_this_call=counting.replays - before, loss=loss_value,
                            lr=float(opt.param_groups[0]["lr"]))
                row["calls"].append(snap)
    except Exception as e:
        row["error"] = error_text(e)
        row["calls"].append(counting.snapshot())
    state = []
    for _p, st in opt.state.items():
        for k, v in st.items():
            if isinstance(v, torch.Tensor):
                state.append((k, tuple(v.shape), str(v.device), v.numel() * v.element_size()))
    row["state_keys"] = sorted({s[0] for s in state})
    row["state_bytes"] = sum(s[3] for s in state)
    row["state_devices"] = sorted({s[2] for s in state})
    row["param_bytes"] = sum(p.numel() * p.element_size() for p in net.parameters())
    emit(row)


if __name__ == "__main__":
    main(os.path.abspath(__file__), CASES, run_one)
