"""Encoder: a 2-layer transformers BertModel in training mode (dropout on), padded attention mask."""
import torch


def get_model_and_inputs():
    from transformers import BertConfig, BertModel

    torch.manual_seed(0)
    config = BertConfig(vocab_size=96, hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
                        max_position_embeddings=32)
    model = BertModel(config).train()
    input_ids = torch.randint(0, config.vocab_size, (2, 8))
    attention_mask = torch.ones(2, 8, dtype=torch.long)
    attention_mask[1, 5:] = 0
    return model, (input_ids,), {"attention_mask": attention_mask}
