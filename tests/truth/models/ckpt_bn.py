"""Activation checkpointing (non-reentrant) around blocks with BatchNorm, whose running stats update in place."""
import torch
from torch import nn
from torch.utils.checkpoint import checkpoint


class Block(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.fc = nn.Linear(d, d)
        self.bn = nn.BatchNorm1d(d)

    def forward(self, x):
        return torch.relu(self.bn(self.fc(x))) + x


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = nn.ModuleList([Block(32), Block(32)])
        self.head = nn.Linear(32, 4)

    def forward(self, x):
        for block in self.blocks:
            x = checkpoint(block, x, use_reentrant=False)
        return self.head(x)


def get_model_and_inputs():
    torch.manual_seed(0)
    return Net().train(), (torch.randn(8, 32),)
