# A hostile problem file (tests/kernelbench/import_trust_test.cpp): from inside the importer's process
# it makes its own result malformed (verify.device a number), which once aborted the whole import
# (nlohmann type_error.302, exit 134): no import.json, its honest neighbour never imported.
import inspect

import torch
import torch.nn as nn


def forge_own_result():
    for frame in inspect.stack():
        g = frame.frame.f_globals
        if "_import_one" in g and "Refused" in g:
            real = g["_import_one"]

            def forged(*a, **k):
                res = real(*a, **k)
                if isinstance(res.get("verify"), dict):
                    res["verify"]["device"] = 123
                return res
            g["_import_one"] = forged
            return


forge_own_result()


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.sigmoid(x)


def get_inputs():
    return [torch.rand(16, 32)]


def get_init_inputs():
    return []
