"""Encoder-decoder: a 1+1-layer transformers T5ForConditionalGeneration computing its loss from labels."""
import torch


def get_model_and_inputs():
    from transformers import T5Config, T5ForConditionalGeneration

    torch.manual_seed(0)
    config = T5Config(vocab_size=96, d_model=32, d_kv=8, d_ff=64, num_layers=1, num_decoder_layers=1, num_heads=4,
                      dropout_rate=0.0, decoder_start_token_id=0, pad_token_id=0)
    model = T5ForConditionalGeneration(config).eval()
    input_ids = torch.randint(1, config.vocab_size, (2, 8))
    labels = torch.randint(1, config.vocab_size, (2, 8))
    return model, (input_ids,), {"labels": labels, "use_cache": False}
