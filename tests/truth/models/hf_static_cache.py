"""Decoder on a StaticCache: one no-grad decode step of transformers Qwen2ForCausalLM; the step writes the new
token's keys and values into the cache tensors, which transformers marks with mark_static_address."""
import torch


def get_model_and_inputs():
    from transformers import Qwen2Config, Qwen2ForCausalLM, StaticCache

    torch.manual_seed(0)
    config = Qwen2Config(vocab_size=128, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
                         num_key_value_heads=2, max_position_embeddings=64)
    model = Qwen2ForCausalLM(config).eval().requires_grad_(False)
    cache = StaticCache(config=config, max_cache_len=16)
    prompt = torch.randint(0, config.vocab_size, (1, 8))
    model(prompt, past_key_values=cache, cache_position=torch.arange(8), use_cache=True)  # prefill, eagerly
    input_ids = torch.randint(0, config.vocab_size, (1, 1))
    return model, (input_ids,), {"past_key_values": cache, "cache_position": torch.tensor([8]), "use_cache": True}
