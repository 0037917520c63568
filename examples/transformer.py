"""A small transformer encoder (torch.nn only)."""
import torch
from torch import nn


class TinyTransformer(nn.Module):
    def __init__(self, vocab=100, d_model=32, heads=4, layers=2):
        super().__init__()
        self.embed = nn.Embedding(vocab, d_model)
        layer = nn.TransformerEncoderLayer(d_model, heads, dim_feedforward=64, dropout=0.0, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.head = nn.Linear(d_model, vocab)

    def forward(self, tokens):
        return self.head(self.encoder(self.embed(tokens)))


def get_model_and_inputs():
    torch.manual_seed(0)
    return TinyTransformer(), (torch.randint(0, 100, (2, 16)),)
