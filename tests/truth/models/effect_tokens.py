"""An op with a side effect (aten._print, which AOT orders with an effect token threaded through the
graph) next to a buffer updated in place under no_grad."""
import torch
from torch import nn


class Logged(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 8)
        self.register_buffer("total", torch.zeros(8))

    def forward(self, x):
        y = self.fc(x)
        torch.ops.aten._print("step")
        with torch.no_grad():
            self.total.add_(y.sum(0))
        return y


def get_model_and_inputs():
    torch.manual_seed(0)
    return Logged(), (torch.randn(4, 8),)
