"""A tiny GPT-2 built from a transformers config: no weights, no download."""
import torch


def get_model_and_inputs():
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    config = GPT2Config(n_layer=2, n_head=2, n_embd=32, vocab_size=128, n_positions=64,
                        bos_token_id=0, eos_token_id=0)
    model = GPT2LMHeadModel(config)
    input_ids = torch.randint(0, 128, (1, 12))
    return model, (input_ids,), {"use_cache": False}
