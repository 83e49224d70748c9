# A hostile problem file (tests/kernelbench/import_sandbox_test.cpp) that does not catch the sandbox's
# refusal: it opens a socket to 127.0.0.1 when the importer loads it. The import must refuse it with
# a reason that says it tried to use the network, and go on with the batch.
import os
import socket

import torch
import torch.nn as nn

socket.create_connection(("127.0.0.1", int(os.environ.get("KERNELEVO_TEST_HOSTILE_PORT", "47613"))), timeout=3).close()


class Model(nn.Module):
    def forward(self, x):
        return x * 3


def get_inputs():
    return [torch.rand(8, 8)]


def get_init_inputs():
    return []
