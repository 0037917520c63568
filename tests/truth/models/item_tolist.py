"""Data-dependent Python control flow: a branch on `.item()` and a loop over `.tolist()` (graph breaks)."""
import torch
from torch import nn


class Router(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 8)
        self.heads = nn.ModuleList([nn.Linear(8, 4) for _ in range(3)])

    def forward(self, x, lengths):
        y = torch.relu(self.fc(x))
        if y.mean().item() > 0:
            y = y * 2
        out = []
        start = 0
        for i, n in enumerate(lengths.tolist()):
            out.append(self.heads[i](y[start:start + n]).sum(0))
            start += n
        return torch.stack(out)


def get_model_and_inputs():
    torch.manual_seed(0)
    return Router(), (torch.randn(6, 8), torch.tensor([1, 2, 3]))
