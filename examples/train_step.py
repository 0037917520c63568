"""A whole training step compiled as people write it: forward and loss, ``loss.backward()``,
``opt.step()`` and ``opt.zero_grad()`` inside the function given to ``torch.compile``
(graphtool runs no backward of its own on it: README, "A whole training step")."""

import torch
from torch import nn

torch.manual_seed(0)
net = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4))
opt = torch.optim.AdamW(net.parameters(), lr=1e-3, foreach=True)


def train_step(x, y):
    loss = nn.functional.mse_loss(net(x), y)
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)
    return loss


model = train_step
example_inputs = (torch.randn(4, 8), torch.randn(4, 4))
