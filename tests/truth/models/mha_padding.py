"""nn.MultiheadAttention (self-attention) with a key padding mask, then a residual LayerNorm."""
import torch
from torch import nn


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.attn = nn.MultiheadAttention(32, 4, batch_first=True)
        self.norm = nn.LayerNorm(32)

    def forward(self, x, key_padding_mask):
        y, _ = self.attn(x, x, x, key_padding_mask=key_padding_mask, need_weights=False)
        return self.norm(x + y)


def get_model_and_inputs():
    torch.manual_seed(0)
    mask = torch.zeros(2, 8, dtype=torch.bool)
    mask[1, 6:] = True  # the second sequence has two padding positions
    return Block().train(), (torch.randn(2, 8, 32), mask)
