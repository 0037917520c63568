"""The benchmark model: a 12-layer nn.TransformerEncoder, d_model 256, in training
(ENCODER_LAYERS=96 for the large-graph render benchmark)."""
import os

import torch
from torch import nn


def get_model_and_inputs():
    torch.manual_seed(0)
    layer = nn.TransformerEncoderLayer(d_model=256, nhead=8, dim_feedforward=1024, dropout=0.0, batch_first=True)
    model = nn.TransformerEncoder(layer, num_layers=int(os.environ.get("ENCODER_LAYERS", "12")), enable_nested_tensor=False)
    return model, (torch.randn(4, 32, 256),)
