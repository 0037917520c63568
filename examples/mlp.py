"""A small MLP, using the get_model_and_inputs() convention."""
import torch
from torch import nn


class MLP(nn.Module):
    def __init__(self, d_in=32, d_hidden=64, d_out=10):
        super().__init__()
        self.fc1 = nn.Linear(d_in, d_hidden)
        self.fc2 = nn.Linear(d_hidden, d_out)

    def forward(self, x):
        return self.fc2(torch.relu(self.fc1(x)))


def get_model_and_inputs():
    torch.manual_seed(0)
    return MLP(), (torch.randn(8, 32),)
