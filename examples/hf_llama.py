"""A Llama model from a transformers config, no weights. LLAMA_SIZE=7b gives the 7-billion one,
meant for `graphtool trace examples/hf_llama.py --device meta`."""
import os

import torch


def get_model_and_inputs():
    from transformers import LlamaConfig, LlamaForCausalLM

    if os.environ.get("LLAMA_SIZE") == "7b":
        config = LlamaConfig(hidden_size=4096, intermediate_size=11008, num_hidden_layers=32,
                             num_attention_heads=32, num_key_value_heads=32, vocab_size=32000)
    else:
        config = LlamaConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                             num_attention_heads=4, num_key_value_heads=2, vocab_size=128)
    model = LlamaForCausalLM(config)
    input_ids = torch.randint(0, config.vocab_size, (1, 8))
    return model, (input_ids,), {"use_cache": False}
