"""A conv net with BatchNorm in training mode, using module-level `model` and `example_inputs`.

BatchNorm updates running_mean, running_var and num_batches_tracked in place in training.
"""
import torch
from torch import nn


class ConvBN(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.bn = nn.BatchNorm2d(8)
        self.fc = nn.Linear(8, 4)

    def forward(self, x):
        x = torch.relu(self.bn(self.conv(x)))
        return self.fc(x.mean(dim=(2, 3)))


torch.manual_seed(0)
model = ConvBN().train()
example_inputs = torch.randn(2, 3, 8, 8)

if __name__ == "__main__":  # a training loop graphtool never runs
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(3):
        model(example_inputs).sum().backward()
        opt.step()
