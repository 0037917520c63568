"""A model whose outputs are views of its input, and one output returned twice."""
import torch
from torch import nn


class Views(nn.Module):
    def forward(self, x):
        flat = x.view(-1)
        first_row = x[0]
        doubled = x * 2
        return flat, first_row, doubled, doubled.view(2, -1)


def get_model_and_inputs():
    return Views(), (torch.randn(4, 3),)
