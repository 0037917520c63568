"""A model meant to run at several batch sizes; `dynamic_inputs` is the second size graphtool lint
--dynamic uses."""
import torch
from torch import nn

model = nn.Sequential(nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 2))
example_inputs = (torch.randn(4, 8),)
dynamic_inputs = (torch.randn(7, 8),)
