# KernelBench level 1 problem 9 as issue 27 describes it (A[32768, 32] @ B[32, 32768], a 4 GiB
# output), written for benchmarks/studies/kb_concurrent.sh where the original file is not at hand.
import torch
import torch.nn as nn


class Model(nn.Module):
    """Single matrix multiplication (C = A * B) where one of the matrices is tall and skinny."""

    def __init__(self):
        super(Model, self).__init__()

    def forward(self, A, B):
        return torch.matmul(A, B)


M = 16384 * 2
N = 16 * 2


def get_inputs():
    A = torch.rand(M, N)
    B = torch.rand(N, M)
    return [A, B]


def get_init_inputs():
    return []
