"""Two inputs that are overlapping views of one tensor, one of them scaled in place: AOT merges them into
a synthetic base, and its metadata then describes the base rather than each input."""
import torch
from torch import nn


class Mixer(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 8)

    def forward(self, a, b):
        a.mul_(2)
        return self.fc(a[:2] + b[:2])


def get_model_and_inputs():
    torch.manual_seed(0)
    base = torch.randn(8, 8)
    return Mixer(), (base[:5], base[3:])
