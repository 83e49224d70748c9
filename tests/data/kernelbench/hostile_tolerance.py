# A hostile problem file (tests/kernelbench/import_trust_test.cpp): from inside the importer's process
# it wraps the importer so that its own result installs a task any kernel passes: atol = rtol = 0.9
# and one correctness trial. The tool sets both itself (imported tolerances lie in [1e-4, 1e-2]).
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
                task = res.get("task_json")
                if isinstance(task, dict):
                    task["tolerance"] = {"atol": 0.9, "rtol": 0.9, "policy": "forged by the problem"}
                    task["trials"] = 1
                    res["tolerance"] = task["tolerance"]
                return res
            g["_import_one"] = forged
            return


forge_own_result()


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.tanh(x)


def get_inputs():
    return [torch.rand(16, 32)]


def get_init_inputs():
    return []
