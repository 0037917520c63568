"""A small MLP whose build takes SLOW_BUILD_SECONDS (default 5): a stand-in for a big config, a
tokenizer or a checkpoint read. Each call of the factory counts one build in the file named by
SLOW_BUILD_COUNT, when set (benchmarks/bench_load_once.py reads it)."""
import os
import time

import torch
from torch import nn


def get_model_and_inputs():
    time.sleep(float(os.environ.get("SLOW_BUILD_SECONDS", "5")))
    if os.environ.get("SLOW_BUILD_COUNT"):
        with open(os.environ["SLOW_BUILD_COUNT"], "a") as f:
            f.write("build\n")
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 10))
    return model, (torch.randn(8, 64),)
