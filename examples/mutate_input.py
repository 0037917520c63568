"""A function that mutates its input in place (a running sum), with keyword inputs."""
import torch


def accumulate(total, x, scale=1.0):
    total.add_(x * scale)
    return total.sum()


model = accumulate
example_inputs = (torch.zeros(4), torch.randn(4))
example_kwargs = {"scale": 2.0}
