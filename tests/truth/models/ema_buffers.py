"""Buffers updated in place under no_grad in forward: an exponential moving average and a step counter."""
import torch
from torch import nn


class EmaNorm(nn.Module):
    def __init__(self, d=16, momentum=0.1):
        super().__init__()
        self.fc = nn.Linear(d, d)
        self.momentum = momentum
        self.register_buffer("ema", torch.zeros(d))
        self.register_buffer("steps", torch.zeros((), dtype=torch.long))

    def forward(self, x):
        y = self.fc(x)
        with torch.no_grad():
            self.ema.mul_(1 - self.momentum).add_(y.mean(0), alpha=self.momentum)
            self.steps += 1
        return y - self.ema


def get_model_and_inputs():
    torch.manual_seed(0)
    return EmaNorm(), (torch.randn(4, 16),)
