"""GPU ground truth for issue 34: loops whose input shapes change from call to call, under
``torch.compile(mode="reduce-overhead")`` (and one ``backend="cudagraphs"`` case).

  python shapes_truth.py one CASE         one case, this process
  python shapes_truth.py all OUT.jsonl    every case, each in a fresh process, one JSON row per case

A case is MODEL.VARIANT. Models and their schedules (the size that changes, call by call):
  decoder_train   a tiny LlamaForCausalLM, loss on labels = input_ids and ``backward()``; sequence lengths
                  DECODER_SCHEDULE (10 distinct sizes, so ``dynamic=False`` passes ``recompile_limit``, 8)
  decoder_infer   the same model under ``torch.no_grad()``
  cnn_last_batch  a small CNN with batch norm, training; batch sizes CNN_SCHEDULE (a short last batch, two epochs)
  kv_decode       one attention layer fed its own growing key/value cache, inference; cache length 1..KV_STEPS
Variants: ``auto`` (torch's default: automatic dynamic after the first size change), ``mark_dynamic``
(``torch._dynamo.mark_dynamic`` on the changing dimension of every call's input), ``dynamic_true``
(``torch.compile(dynamic=True)``), ``dynamic_false``; ``decoder_infer.cudagraphs_backend`` uses
``backend="cudagraphs"`` (automatic dynamic). ``capture_sizes``: ``mark_dynamic`` with
``torch._inductor.config.triton.cudagraph_capture_sizes = CAPTURE_SIZES``; ``capture_sizes_static``: the same
setting with ``dynamic=False`` (a graph with no symbolic int has the key None, never in the list);
``eager_on_recompile``: ``torch.compiler.set_stance("eager_on_recompile")`` after the first call.
Each call: ``cudagraph_mark_step_begin()``, the peak counter reset, the call (and backward in training). After
each call: the size, graphs dynamo compiled so far, recordings (``torch.cuda.graph`` entered), replays in the
call, distinct functions cudagraph trees recorded, ``cudagraph_skips``, the allocator's allocated, peak and
reserved bytes (cudagraph trees' pool is part of reserved), the private pools' own reserved and allocated bytes
(``pool_reserved``, ``pool_allocated``, from ``torch.cuda.memory_snapshot()``) and, for each recording in the call,
the pool right after it (``recorded``). At the end: the guard failures of every recompile.
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from truth_common import Counting, device, emit, env_facts, error_text, main, sync

DECODER_SCHEDULE = [17, 33, 64, 128, 17, 33, 64, 128, 200, 7, 48, 96, 256, 80, 17, 64]
CNN_SCHEDULE = [32, 32, 32, 7, 32, 32, 32, 7]
KV_STEPS = 20
MODELS = ["decoder_train", "decoder_infer", "cnn_last_batch", "kv_decode"]
VARIANTS = ["auto", "mark_dynamic", "dynamic_true", "dynamic_false"]
CASES = [f"{m}.{v}" for m in MODELS for v in VARIANTS] + ["decoder_infer.cudagraphs_backend"] + [
    f"{m}.{v}" for m in ("decoder_train", "decoder_infer") for v in ("capture_sizes", "capture_sizes_static",
                                                                       "eager_on_recompile")]
CAPTURE_SIZES = (17, 64)


def build(model_name: str, dev: str):
    import torch
    from torch import nn

    torch.manual_seed(0)
    if model_name.startswith("decoder"):
        from transformers import LlamaConfig, LlamaForCausalLM

        cfg = LlamaConfig(vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                          num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=512)
        net = LlamaForCausalLM(cfg).to(dev)
        if model_name == "decoder_infer":
            net.eval()

        def inputs(n):
            ids = torch.randint(0, 256, (2, n), device=dev)
            return (ids,), 1

        def call(fn, args):
            if model_name == "decoder_train":
                out = fn(input_ids=args[0], labels=args[0])
                out.loss.backward()
                return out.loss
            with torch.no_grad():
                return fn(input_ids=args[0]).logits
        return net, [inputs(n) for n in DECODER_SCHEDULE], DECODER_SCHEDULE, call
    if model_name == "cnn_last_batch":
        net = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(), nn.MaxPool2d(2),
                            nn.Conv2d(16, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(),
                            nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(32, 10)).to(dev)

        def call(fn, args):
            out = fn(args[0])
            out.sum().backward()
            return out
        return net, [((torch.randn(b, 3, 32, 32, device=dev),), 0) for b in CNN_SCHEDULE], CNN_SCHEDULE, call

    d = 64

    class Decode(nn.Module):
        def __init__(self):
            super().__init__()
            self.qkv = nn.Linear(d, 3 * d)
            self.out = nn.Linear(d, d)

        def forward(self, x, k_cache, v_cache):
            q, k, v = self.qkv(x).chunk(3, dim=-1)
            k = torch.cat([k_cache, k], dim=1)
            v = torch.cat([v_cache, v], dim=1)
            att = torch.softmax(q @ k.transpose(1, 2) / d ** 0.5, dim=-1)
            return self.out(att @ v), k, v

    net = Decode().to(dev).eval()

    def call(fn, args):
        with torch.no_grad():
            return fn(*args)
    sizes = list(range(1, KV_STEPS + 1))
    return net, None, sizes, call


def run_one(case: str) -> None:
    import torch
    from torch._dynamo.utils import counters

    model_name, variant = case.split(".")
    dev = device()
    counting = Counting()
    row = {"case": case, "model": model_name, "variant": variant, "env": env_facts(), "calls": [], "error": None}
    net, schedule, sizes, call = build(model_name, dev)
    row["sizes"] = sizes
    row["recompile_limit"] = getattr(torch._dynamo.config, "recompile_limit",
                                     getattr(torch._dynamo.config, "cache_size_limit", None))
    for knob in ("cudagraph_dynamic_shape_warn_limit", "cudagraph_unexpected_rerecord_limit",
                 "cudagraph_skip_dynamic_graphs"):
        row[knob] = getattr(torch._inductor.config.triton, knob, None)
    torch._dynamo.reset()
    counters.clear()
    kwargs = {"backend": "cudagraphs"} if variant == "cudagraphs_backend" else {"mode": "reduce-overhead"}
    if variant == "dynamic_true":
        kwargs["dynamic"] = True
    elif variant in ("dynamic_false", "capture_sizes_static"):
        kwargs["dynamic"] = False
    if variant.startswith("capture_sizes"):
        torch._inductor.config.triton.cudagraph_capture_sizes = CAPTURE_SIZES
    row["cudagraph_capture_sizes"] = getattr(torch._inductor.config.triton, "cudagraph_capture_sizes", None)
    fn = torch.compile(net, **kwargs)
    k_cache = v_cache = None
    try:
        for i, size in enumerate(sizes):
            if schedule is None:  # kv_decode: the cache grows by one position per call
                if k_cache is None:
                    k_cache = torch.randn(1, 0, 64, device=dev)
                    v_cache = torch.randn(1, 0, 64, device=dev)
                args, dim = (torch.randn(1, 1, 64, device=dev), k_cache, v_cache), 1
                marked = args[1:]
            else:
                args, dim = schedule[i]
                marked = args[:1]
            if variant == "eager_on_recompile" and i == 1:
                torch.compiler.set_stance("eager_on_recompile")
            if variant in ("mark_dynamic", "capture_sizes"):
                for t in marked:
                    torch._dynamo.mark_dynamic(t, dim)
            before = counting.replays
            recorded_before = len(counting.recorded)
            if torch.cuda.is_available():
                torch.cuda.reset_peak_memory_stats()
            torch.compiler.cudagraph_mark_step_begin()
            for p in net.parameters():
                p.grad = None
            out = call(fn, args)
            if schedule is None:
                k_cache, v_cache = out[1].clone(), out[2].clone()
            out = None
            sync()
            snap = counting.snapshot()
            snap.pop("recompiles", None)
            snap.pop("break_reasons", None)
            snap.update(call=i + 1, size=size, replays_this_call=counting.replays - before,
                        recorded=counting.recorded[recorded_before:])
            row["calls"].append(snap)
    except Exception as e:
        row["error"] = error_text(e)
    row["recompiles"] = Counting.snapshot(counting)["recompiles"]
    row["frames"] = {k: int(v) for k, v in counters["frames"].items()}
    row["stats"] = {k: int(v) for k, v in counters["stats"].items()}
    row["inductor_cudagraph_counters"] = {k: int(v) for k, v in counters["inductor"].items() if "cudagraph" in k}
    emit(row)


if __name__ == "__main__":
    main(os.path.abspath(__file__), CASES, run_one)
