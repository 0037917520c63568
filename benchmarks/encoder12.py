"""The benchmark model: a 12-layer nn.TransformerEncoder, d_model 256, in training."""
import torch
from torch import nn


def get_model_and_inputs():
    torch.manual_seed(0)
    layer = nn.TransformerEncoderLayer(d_model=256, nhead=8, dim_feedforward=1024, dropout=0.0, batch_first=True)
    model = nn.TransformerEncoder(layer, num_layers=12, enable_nested_tensor=False)
    return model, (torch.randn(4, 32, 256),)
