"""Boolean-mask indexing: a data-dependent output shape."""
import torch


def keep_positive(x):
    y = x * 3
    return y[y > 0].sum()


model = keep_positive
example_inputs = (torch.randn(16),)
