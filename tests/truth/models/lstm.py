"""nn.LSTM between two blocks of the model's own: dynamo does not trace RNN modules by default, so it
gives up on the frame that calls the LSTM and compiles the blocks' own frames one by one."""
import torch
from torch import nn


class Embed(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(16, 16)

    def forward(self, x):
        return torch.tanh(self.proj(x))


class Head(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(32, 8)

    def forward(self, h):
        return self.fc(h).log_softmax(-1)


class Tagger(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = Embed()
        self.lstm = nn.LSTM(16, 32, num_layers=1, batch_first=True)
        self.head = Head()

    def forward(self, x):
        h, _ = self.lstm(self.embed(x))
        return self.head(h)


def get_model_and_inputs():
    torch.manual_seed(0)
    return Tagger(), (torch.randn(2, 8, 16),)
