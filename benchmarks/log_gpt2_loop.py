"""The workload of benchmarks/bench_log.py: a GPT-2 training loop (transformers, tiny config, no download) under
torch.compile with inductor on this CPU, whose TORCH_TRACE log graphtool log and tlparse then read.

    TORCH_TRACE=DIR python benchmarks/log_gpt2_loop.py

Four layers, six steps at sequence lengths 16 to 64 (the second length makes them dynamic: recompiles), forward,
loss, backward and an AdamW step: about 9 MB of log on torch 2.13.
"""

import torch


def main(steps=(16, 24, 32, 40, 48, 64)):
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    config = GPT2Config(n_layer=4, n_head=4, n_embd=64, vocab_size=512, n_positions=128, bos_token_id=0, eos_token_id=0)
    model = GPT2LMHeadModel(config)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    compiled = torch.compile(model)
    for n in steps:
        ids = torch.randint(0, 512, (2, n))
        loss = compiled(ids, labels=ids, use_cache=False).loss
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)


if __name__ == "__main__":
    main()
