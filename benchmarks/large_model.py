"""The very large model of issue 49: 500 blocks of 10 modules each, 5,502 modules in all (the root, its
ModuleList, 500 blocks and their 5,000 children), small tensors so that the graph's size, not the
arithmetic, is what costs. ``LARGE_BLOCKS=N`` builds N blocks (profiling at 50, 100, 200).

    python benchmarks/bench_large.py            # graphtool report against the bare AOT stage
"""
import os

import torch
from torch import nn

WIDTH = 16


class Block(nn.Module):
    """Ten modules: two pre-norm MLP halves, the second gated."""

    def __init__(self, width: int = WIDTH):
        super().__init__()
        self.norm1 = nn.LayerNorm(width)
        self.up1 = nn.Linear(width, 2 * width)
        self.act1 = nn.GELU()
        self.down1 = nn.Linear(2 * width, width)
        self.norm2 = nn.LayerNorm(width)
        self.up2 = nn.Linear(width, 2 * width)
        self.act2 = nn.SiLU()
        self.down2 = nn.Linear(2 * width, width)
        self.gate = nn.Linear(width, width)
        self.sigmoid = nn.Sigmoid()

    def forward(self, x):
        x = x + self.down1(self.act1(self.up1(self.norm1(x))))
        h = self.down2(self.act2(self.up2(self.norm2(x))))
        return x + h * self.sigmoid(self.gate(x))


class Large(nn.Module):
    def __init__(self, blocks: int):
        super().__init__()
        self.blocks = nn.ModuleList(Block() for _ in range(blocks))

    def forward(self, x):
        for block in self.blocks:
            x = block(x)
        return x


def blocks() -> int:
    return int(os.environ.get("LARGE_BLOCKS", "500"))


def get_model_and_inputs():
    torch.manual_seed(0)
    return Large(blocks()), (torch.randn(4, WIDTH),)
