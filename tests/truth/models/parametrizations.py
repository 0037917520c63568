"""Parametrized weights: a custom symmetric parametrization and spectral_norm (whose power iteration updates
its u/v buffers in place in training)."""
import torch
from torch import nn
from torch.nn.utils import parametrizations, parametrize


class Symmetric(nn.Module):
    def forward(self, w):
        return w.triu() + w.triu(1).transpose(0, 1)


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.sym = nn.Linear(16, 16)
        parametrize.register_parametrization(self.sym, "weight", Symmetric())
        self.sn = parametrizations.spectral_norm(nn.Linear(16, 8))

    def forward(self, x):
        return self.sn(torch.relu(self.sym(x)))


def get_model_and_inputs():
    torch.manual_seed(0)
    return Net().train(), (torch.randn(4, 16),)
