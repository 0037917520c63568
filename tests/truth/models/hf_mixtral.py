"""Mixture of experts: a 1-layer transformers MixtralForCausalLM, 4 experts, top-2 routing."""
import torch


def get_model_and_inputs():
    from transformers import MixtralConfig, MixtralForCausalLM

    torch.manual_seed(0)
    config = MixtralConfig(vocab_size=96, hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=4,
                           num_key_value_heads=2, num_local_experts=4, num_experts_per_tok=2, max_position_embeddings=64)
    model = MixtralForCausalLM(config).eval()
    input_ids = torch.randint(0, config.vocab_size, (1, 8))
    return model, (input_ids,), {"use_cache": False}
