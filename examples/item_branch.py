"""`.item()` in forward: a host sync and a graph break under torch.compile."""
import torch
from torch import nn


class Gate(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x):
        y = self.fc(x)
        if y.sum().item() > 0:
            return y * 2
        return y - 1


def get_model_and_inputs():
    torch.manual_seed(0)
    return Gate(), (torch.randn(2, 4),)
