"""`t_()` on an input: a metadata mutation that dynamo applies outside the graph."""
import torch


def transpose_in_place(x):
    x.t_()
    return x + 1


model = transpose_in_place
example_inputs = (torch.randn(2, 3),)
