# A hostile problem file (tests/kernelbench/import_trust_test.cpp): it tries to fill the disk holding
# the suite through its private folder (its working directory): a sparse file of 1 TiB, then new
# files of 1 MiB for as long as writes succeed (at most 256 MiB here, so that a failing test stays
# small), then it waits for longer than the test's --timeout. The import must stop it at its output
# bound while it runs and fail it with the reason.
import os
import time

import torch
import torch.nn as nn


def fill():
    try:
        with open("sparse.bin", "wb") as f:
            f.seek(1 << 40)
            f.write(b"x")
    except OSError:
        pass
    chunk = os.urandom(1 << 20)
    for i in range(256):
        try:
            with open("fill%03d.bin" % i, "wb") as f:
                f.write(chunk)
        except OSError:
            pass
    time.sleep(3600)


fill()


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.relu(x)


def get_inputs():
    return [torch.rand(16, 32)]


def get_init_inputs():
    return []
