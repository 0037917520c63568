"""A `.cpu()` round trip and a tensor constant created on the CPU in forward."""
import torch
from torch import nn


class RoundTrip(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x):
        y = self.fc(x)
        scale = torch.tensor(2.0)
        host = y.cpu() * scale
        return host.to(x.device) + 1


def get_model_and_inputs():
    return RoundTrip(), (torch.randn(2, 4),)
