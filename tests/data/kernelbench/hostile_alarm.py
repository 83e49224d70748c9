# A hostile problem file (tests/kernelbench/import_trust_test.cpp): it ignores the importer's alarm
# (SIGALRM, its --timeout) and sleeps. The import must kill it at its --timeout plus a short grace,
# not at three times the timeout plus two minutes.
import signal
import time

import torch
import torch.nn as nn

signal.signal(signal.SIGALRM, signal.SIG_IGN)
time.sleep(3600)


class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x)


def get_inputs():
    return [torch.rand(16, 32)]


def get_init_inputs():
    return []
