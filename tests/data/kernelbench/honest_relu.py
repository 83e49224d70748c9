# An honest problem imported in the same batch as the hostile ones (tests/kernelbench/import_sandbox_test.cpp).
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.relu(x)


batch_size = 64
dim = 128


def get_inputs():
    return [torch.rand(batch_size, dim)]


def get_init_inputs():
    return []
