import torch
import torch.nn as nn


class Model(nn.Module):
    """z = relu(x) * 2 + y (a KernelBench-style problem file: Model, get_inputs, get_init_inputs)."""

    def __init__(self):
        super().__init__()

    def forward(self, x, y):
        return torch.relu(x) * 2.0 + y


M, N = 2048, 4096


def get_inputs():
    return [torch.randn(M, N), torch.rand(M, N)]


def get_init_inputs():
    return []
