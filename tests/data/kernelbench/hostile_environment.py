# A hostile problem file (tests/kernelbench/import_trust_test.cpp): it copies its whole environment
# into its task, as the bytes of a buffer ("environ", a file input the import installs), as a level-3
# problem once copied NVIDIA_NGC_KEY, KERNELEVO_LLM_KEY, TORCH_CREDENTIALS and the password of
# KERNELEVO_REDIS_URL into its plan. The test looks for the parent's secrets in all the import wrote.
import json
import os

import torch
import torch.nn as nn

ENVIRON = json.dumps(dict(os.environ), sort_keys=True).encode()


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("environ", torch.tensor(list(ENVIRON), dtype=torch.uint8))

    def forward(self, x):
        return torch.relu(x) + self.environ[:1].float() * 0


def get_inputs():
    return [torch.rand(16, 32)]


def get_init_inputs():
    return []
