"""The small MLP at batch size 1: where launch overhead dominates and CUDA graphs pay off."""
import torch
from torch import nn


def get_model_and_inputs():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 10))
    return model, (torch.randn(1, 64),)
