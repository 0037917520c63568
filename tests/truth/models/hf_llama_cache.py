"""Decoder with its default cache: transformers LlamaForCausalLM, use_cache=True (a DynamicCache is built and returned)."""
import torch


def get_model_and_inputs():
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=128, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
                         num_key_value_heads=2, max_position_embeddings=64)
    model = LlamaForCausalLM(config).eval()
    input_ids = torch.randint(0, config.vocab_size, (1, 8))
    return model, (input_ids,), {"use_cache": True}
