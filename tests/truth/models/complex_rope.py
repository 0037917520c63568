"""Rotary position embedding in complex arithmetic (view_as_complex, a complex64 buffer from torch.polar)."""
import torch
from torch import nn


class RopeAttention(nn.Module):
    def __init__(self, d=32, heads=4, seq=8):
        super().__init__()
        self.heads, self.hd = heads, d // heads
        self.qkv = nn.Linear(d, 3 * d)
        self.out = nn.Linear(d, d)
        freqs = 1.0 / (10000 ** (torch.arange(0, self.hd, 2).float() / self.hd))
        angles = torch.outer(torch.arange(seq).float(), freqs)
        self.register_buffer("freqs_cis", torch.polar(torch.ones_like(angles), angles))

    def rope(self, x):
        xc = torch.view_as_complex(x.float().reshape(*x.shape[:-1], -1, 2))
        xc = xc * self.freqs_cis[None, :, None, :]
        return torch.view_as_real(xc).flatten(3).type_as(x)

    def forward(self, x):
        b, s, _ = x.shape
        q, k, v = self.qkv(x).view(b, s, 3, self.heads, self.hd).unbind(2)
        q, k = self.rope(q), self.rope(k)
        y = nn.functional.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), is_causal=True)
        return self.out(y.transpose(1, 2).reshape(b, s, -1))


def get_model_and_inputs():
    torch.manual_seed(0)
    return RopeAttention(), (torch.randn(2, 8, 32),)
