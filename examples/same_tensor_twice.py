"""The same tensor passed twice, and a view of another input."""
import torch


def combine(a, b, c):
    c.mul_(2)
    return a + b + c.sum()


base = torch.randn(4)
model = combine
example_inputs = (base, base, torch.randn(8)[:4])
