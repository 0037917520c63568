"""Known graph breaks: print, a break inside a loop, and an unsupported builtin."""
import torch
from torch import nn


class Breaky(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x):
        y = self.fc(x)
        print("logging from forward")
        for _ in range(2):
            y = y + 1
            torch._dynamo.graph_break()
        return y


def get_model_and_inputs():
    return Breaky(), (torch.randn(2, 4),)
