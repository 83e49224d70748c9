"""What every part of the KernelBench importer shares: the dtype table and the kernel ABI's limits,
the refusals, names, loading a problem file, raw tensor files and the progress lines."""
import json
import os
import re
import time
import types

import torch

# dtype -> (task-file name, kevo_dtype value of runtime/include/kernelevo/abi.h)
DTYPES = {
    torch.float32: ("float32", 0), torch.float16: ("float16", 1), torch.bfloat16: ("bfloat16", 2),
    torch.int32: ("int32", 3), torch.int64: ("int64", 4), torch.bool: ("bool", 5),
    torch.float64: ("float64", 6), torch.int8: ("int8", 7), torch.uint8: ("uint8", 8),
}
MAX_DIMS = 8  # the kernel ABI's limit
MAX_TENSORS = 64  # inputs (and outputs) of a task (tool/task)
MAX_TASK_NAME_CHARS = 128  # tool/task/task_checks.h kMaxTaskNameChars: a name becomes file names (NAME/sm_90.cu, ...)


class Refused(Exception):
    """The problem cannot be imported faithfully; the message is the one-line reason."""


class ShrinkRefused(Refused):
    """Refused only at the shrunk sizes: worth another try with larger ones."""


class Timeout(BaseException):
    """The per-problem alarm; a BaseException so that no `except Exception` on the way swallows it."""


def one_line(text, limit=300):
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def task_name(path):
    stem = os.path.splitext(os.path.basename(path))[0]
    level = re.search(r"level[_-]?(\d+)", os.path.abspath(path))
    name = ("kb%s_" % level.group(1) if level else "kb_") + stem
    name = re.sub(r"[^A-Za-z0-9_]", "_", name)
    return re.sub(r"_+$", "", name)


def identifier(text, used):
    name = re.sub(r"[^A-Za-z0-9_]", "_", text) or "t"
    if not (name[0].isalpha() or name[0] == "_"):
        name = "t_" + name
    base, i = name, 2
    while name in used:
        name = "%s_%d" % (base, i)
        i += 1
    used.add(name)
    return name


def task_name_problem(name):
    """"" when `name` can name a task, else why not: the rule of tool/task/task_checks.cpp's
    task_name_problem() (a C identifier of ASCII letters, digits and _, at most MAX_TASK_NAME_CHARS), in its words."""
    if not isinstance(name, str):
        return "%r is a %s, not a string" % (name, type(name).__name__)
    shown = name[:40] + "..." if len(name) > 40 else name
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
        return "'%s' is not a C identifier (letters, digits, _)" % shown
    if len(name) > MAX_TASK_NAME_CHARS:
        return ("'%s' has %d characters; a task name has at most %d (letters, digits and _, not starting with a digit)"
                % (shown, len(name), MAX_TASK_NAME_CHARS))
    return ""


def load_problem(path):
    with open(path, encoding="utf-8") as f:
        src = f.read()
    mod = types.ModuleType("kernelbench_problem")
    mod.__file__ = os.path.abspath(path)
    try:
        exec(compile(src, path, "exec"), mod.__dict__)
    except Exception as e:
        raise Refused("cannot load the problem: %s: %s" % (type(e).__name__, one_line(e)))
    for need in ("Model", "get_inputs", "get_init_inputs"):
        if need not in mod.__dict__:
            raise Refused("the file defines no %s (a KernelBench problem has Model, get_inputs and get_init_inputs)" % need)
    return src, mod


def dtype_of(t, what):
    if t.dtype not in DTYPES:
        raise Refused("unsupported dtype %s (%s)" % (str(t.dtype).replace("torch.", ""), what))
    if t.dim() > MAX_DIMS:
        raise Refused("%s has %d dimensions; the kernel ABI allows %d" % (what, t.dim(), MAX_DIMS))
    return DTYPES[t.dtype]


def write_raw(t, path):
    """Raw little-endian bytes, row-major: what the task's file init kind reads."""
    flat = t.detach().cpu().contiguous().reshape(-1)
    if flat.dtype == torch.bfloat16:
        flat = flat.view(torch.int16)
    flat.numpy().tofile(path)


class Phases:
    """One progress line per phase, {"progress": {"name", "phase", "seconds"}}, through `emit`: the
    entry script's print (the protocol's stdout under `kernelevo import kernelbench`, whose wrapper
    gives only the script's own print the protocol's copy of stdout)."""

    def __init__(self, name, emit):
        self.name, self.t, self.emit = name, time.time(), emit
        self.seconds = {}

    def done(self, phase):
        now = time.time()
        s = round(now - self.t, 3)
        self.t = now
        self.seconds[phase] = round(self.seconds.get(phase, 0) + s, 3)
        self.emit(json.dumps({"progress": {"name": self.name, "phase": phase, "seconds": s}}), flush=True)
