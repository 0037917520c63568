"""The model ``graphtool trace`` uses when given no script: a small conv net with BatchNorm.

It shows the things graphtool reports: parameters and buffers by name, BatchNorm's running stats
mutated in place during training, and forward and backward graphs tied to the lines below.
"""

import torch
from torch import nn


class TinyConvNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, kernel_size=3, padding=1)
        self.bn = nn.BatchNorm2d(8)
        self.head = nn.Linear(8, 10)

    def forward(self, images):
        x = torch.relu(self.bn(self.conv(images)))
        x = x.mean(dim=(2, 3))
        return self.head(x)


def get_model_and_inputs():
    torch.manual_seed(0)
    return TinyConvNet(), (torch.randn(4, 3, 16, 16),)
