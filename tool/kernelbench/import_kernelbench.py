#!/usr/bin/env python3
"""Turns KernelBench problem files into kernelevo task directories (driven by `kernelevo import
kernelbench`; it needs PyTorch, validation later needs no Python).

For each problem FILE.py (class Model(nn.Module), get_inputs(), get_init_inputs()):
  - builds the model exactly as KernelBench does: torch.manual_seed(42), get_init_inputs(),
    torch.manual_seed(42), Model(*init) on the CPU, then moves it to the device;
  - records how get_inputs() draws each input (rand, randn, randint with its bounds, ones, zeros);
    an input computed from random values is stored as a fixed tensor file instead;
  - traces the computation with torch.jit over a functional wrapper whose inputs are the problem's
    inputs followed by the model's parameters and buffers, and saves it as model.pt;
  - writes the parameters and buffers as raw tensor files (init kind "file"), task.json, problem.py
    and graph.py (the traced forward, arguments named as the task's inputs; reference.show lists both);
  - names dimensions by role (each module constant varied on the meta device), measures the model's
    own error (fp32 vs fp64, TF32 off) for the task's tolerance, counts conv/matmul FLOPs;
  - verifies itself: the trace on a second draw of inputs when it may depend on values, then the
    C++ generic reference (kernelevo-refcheck on the built reference library) against the Python
    model on inputs both sides make by one formula (no multi-GiB files), at up to 2^24 elements
    per output.
Prints a progress line per phase ({"progress": {"name", "phase", "seconds"}}) on stdout.
Refusals (data-dependent control flow, randomness in forward, BatchNorm in training mode,
unsupported dtypes, ...) get a one-line reason and the batch goes on.

Prints one JSON object per problem on stdout (with "task_json", the task as JSON, when imported).
`kernelevo import kernelbench` runs one problem per process, sandboxed, with --out a private folder
of its own: it copies the checked files from there into the suite and writes task.json itself.
"""
import argparse
import contextlib
import fcntl
import inspect
import json
import math
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import traceback
import types
import warnings

import torch
from torch import nn

# dtype -> (task-file name, kevo_dtype value of runtime/include/kernelevo/abi.h)
DTYPES = {
    torch.float32: ("float32", 0), torch.float16: ("float16", 1), torch.bfloat16: ("bfloat16", 2),
    torch.int32: ("int32", 3), torch.int64: ("int64", 4), torch.bool: ("bool", 5),
    torch.float64: ("float64", 6), torch.int8: ("int8", 7), torch.uint8: ("uint8", 8),
}
MAX_DIMS = 8  # the kernel ABI's limit
MAX_TENSORS = 64  # inputs (and outputs) of a task (tool/task)

# Ops that draw random numbers: a forward using them cannot be checked against a fixed reference.
RANDOM_OPS = {
    "aten::rand", "aten::randn", "aten::randint", "aten::rand_like", "aten::randn_like", "aten::randint_like",
    "aten::bernoulli", "aten::bernoulli_", "aten::normal", "aten::normal_", "aten::uniform_", "aten::multinomial",
    "aten::randperm", "aten::exponential_", "aten::geometric_", "aten::cauchy_", "aten::log_normal_",
    "aten::native_dropout", "aten::rrelu", "aten::rrelu_with_noise", "aten::poisson",
}
DROPOUT_OPS = {"aten::dropout", "aten::feature_dropout", "aten::alpha_dropout", "aten::feature_alpha_dropout",
               "aten::dropout_", "aten::feature_dropout_", "aten::alpha_dropout_", "aten::feature_alpha_dropout_"}


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


def load_problem(path):
    src = open(path, encoding="utf-8").read()
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


# ---- recording how get_inputs() draws its tensors -------------------------------------------------

class Recorder:
    """Wraps torch's generators while get_inputs() runs and remembers which tensor came from which
    (made on `device` when one is given and the call names none)."""

    def __init__(self, device=None):
        self.made = {}  # id(tensor) -> (tensor, init)
        self.device = device

    def _wrap(self, name, init_of):
        orig = getattr(torch, name)

        def fn(*args, **kwargs):
            if self.device is not None and kwargs.get("device") is None and not name.endswith("_like"):
                kwargs["device"] = self.device
            t = orig(*args, **kwargs)
            if isinstance(t, torch.Tensor):
                try:
                    init = init_of(args, kwargs)
                except Exception:
                    init = None
                if init is not None:
                    self.made[id(t)] = (t, init)
            return t
        return orig, fn

    @contextlib.contextmanager
    def active(self):
        def rand(a, k):
            return {"kind": "rand", "low": 0, "high": 1}

        def randn(a, k):
            return {"kind": "randn", "mean": 0, "std": 1}

        def randint(a, k):
            ints = [x for x in a if isinstance(x, int) and not isinstance(x, bool)]
            low = k.get("low", ints[0] if len(ints) >= 2 else 0)
            high = k.get("high", ints[1] if len(ints) >= 2 else ints[0])
            return {"kind": "randint", "low": int(low), "high": int(high)}

        def const(kind):
            return lambda a, k: {"kind": kind}

        table = {"rand": rand, "randn": randn, "randint": randint, "rand_like": rand, "randn_like": randn,
                 "ones": const("ones"), "zeros": const("zeros"), "ones_like": const("ones"),
                 "zeros_like": const("zeros")}
        saved = {}
        for name, init_of in table.items():
            orig, fn = self._wrap(name, init_of)
            saved[name] = orig
            setattr(torch, name, fn)
        # Moves and casts keep the distribution: torch.rand(...).cuda(), .to(dtype), .float(), ...
        methods = {}
        for name in ("cuda", "to", "float", "double", "half", "bfloat16", "contiguous", "clone"):
            orig = getattr(torch.Tensor, name)
            methods[name] = orig

            def keep(t, *a, __orig=orig, **k):
                out = __orig(t, *a, **k)
                hit = self.made.get(id(t))
                if isinstance(out, torch.Tensor) and hit is not None and hit[0] is t:
                    self.made[id(out)] = (out, hit[1])
                return out
            setattr(torch.Tensor, name, keep)
        try:
            yield self
        finally:
            for name, orig in saved.items():
                setattr(torch, name, orig)
            for name, orig in methods.items():
                setattr(torch.Tensor, name, orig)

    def init_of(self, t):
        hit = self.made.get(id(t))
        return hit[1] if hit is not None and hit[0] is t else None


# ---- shrinking (CPU machines: --max-numel) ------------------------------------------------------------

NOT_A_SIZE = re.compile(r"kernel|stride|pad|dilation|group|head|axis|^k$|scale|factor|eps|momentum|seed", re.I)
# The order sizes shrink in (issue 40): the batch first (down to BATCH_FLOOR, so a kernel that ignores
# the batch index still fails), then spatial and sequence sizes, then the sizes tied to the model's
# structure and what it reduces over (features, channels, a softmax's row `dim`; divisibility by
# groups, bias and norm shapes), which are kept as long as possible.
BATCH = re.compile(r"batch|^bs$", re.I)
STRUCTURAL = re.compile(r"channel|feature|hidden|embed|_shape$|_size$|^C$|^num_|^dim$|_dim$|^d_?model$", re.I)
BATCH_FLOOR = 2
SIZE_FLOOR = 16  # other sizes: only values >= 16 are halved


def input_numel(mod):
    """Elements of get_inputs() without allocating them (meta tensors)."""
    return sum(x.numel() for x in _meta_inputs(mod))


def size_tier(name):
    """0: batch, 1: spatial and sequence sizes, 2: channels, features, reduced dims; None: not a size."""
    if name.startswith("_") or NOT_A_SIZE.search(name):
        return None
    if BATCH.search(name):
        return 0
    return 2 if STRUCTURAL.search(name) else 1


def halvable_in(tier):
    return (lambda e: e // 2 >= BATCH_FLOOR) if tier == 0 else (lambda e: e >= SIZE_FLOOR)


def shrink(mod, max_numel, joint=False):
    """Halves the module's size constants until the inputs hold <= max_numel elements, tier by tier
    (size_tier: the batch, then spatial and sequence sizes, then channels and features); within a
    tier the largest value first, everywhere it appears in that tier (integers and tuples of
    integers), so sizes that were equal stay equal. `joint`: everywhere it appears in any tier (the
    retry for a problem whose batch must equal another size, as HingeLoss's broadcast of
    (batch, *input_shape) by (batch,) needs). Returns {name: (old, new)}."""
    changed = {}

    def candidates(tier=None):
        for k, v in vars(mod).items():
            if size_tier(k) is None or (tier is not None and size_tier(k) != tier):
                continue
            if isinstance(v, int) and not isinstance(v, bool):
                yield k, v, [v]
            elif isinstance(v, (tuple, list)) and v and all(isinstance(e, int) and not isinstance(e, bool) for e in v):
                yield k, v, list(v)

    tier = 0
    for _ in range(400):
        try:
            if input_numel(mod) <= max_numel:
                break
        except Exception:
            pass  # meta tensors unsupported by this get_inputs(): shrink until nothing is left to shrink
        values = [e for _, _, elems in candidates(tier) for e in elems if halvable_in(tier)(e)]
        if not values:
            if tier == 2:
                break
            tier += 1
            continue
        big = max(values)
        for k, v, elems in list(candidates(None if joint else tier)):
            if big not in elems or not halvable_in(size_tier(k))(big):
                continue
            new = v // 2 if isinstance(v, int) else type(v)(e // 2 if e == big else e for e in v)
            setattr(mod, k, new)
            changed[k] = (changed.get(k, (v,))[0], new)
    return changed


# ---- the functional wrapper that gets traced -------------------------------------------------------

def slots_of(model):
    """(name, tensor) of every parameter and buffer, in a fixed order."""
    out = [(n, p) for n, p in model.named_parameters()]
    out += [(n, b) for n, b in model.named_buffers() if b is not None]
    return out


@contextlib.contextmanager
def swapped(model, values):
    old = []
    try:
        for name, v in values:
            *path, leaf = name.split(".")
            m = model
            for p in path:
                m = getattr(m, p)
            store = m._parameters if leaf in m._parameters else m._buffers
            old.append((store, leaf, store[leaf]))
            store[leaf] = v
        refresh_flat_weights(model)
        yield
    finally:
        for store, leaf, v in reversed(old):
            store[leaf] = v
        refresh_flat_weights(model)


def refresh_flat_weights(model):
    """RNN modules (LSTM, GRU, ...) keep a list of their weights; point it at the swapped-in tensors."""
    for m in model.modules():
        names = getattr(m, "_flat_weights_names", None)
        if isinstance(names, list) and hasattr(m, "_flat_weights"):
            m._flat_weights = [getattr(m, n) if hasattr(m, n) else None for n in names]


class Functional(nn.Module):
    """forward(*inputs, *parameters_and_buffers) -> the model's output, with nothing held inside."""

    def __init__(self, model, call_args, tensor_pos, slot_names):
        super().__init__()
        self._held = [model]  # a plain list: the model is not a submodule, its weights are not saved
        self._call_args = call_args
        self._tensor_pos = tensor_pos
        self._slots = slot_names

    def forward(self, *args):
        n = len(self._tensor_pos)
        call = list(self._call_args)
        for pos, t in zip(self._tensor_pos, args[:n]):
            call[pos] = t
        with swapped(self._held[0], list(zip(self._slots, args[n:]))):
            return self._held[0](*call)


def flat_outputs(out):
    if isinstance(out, torch.Tensor):
        return [out]
    if isinstance(out, (tuple, list)):
        res = []
        for o in out:
            res += flat_outputs(o)
        return res
    raise Refused("the model returns a %s, not tensors" % type(out).__name__)


def graph_nodes(graph):
    for node in graph.nodes():
        yield node
        for block in node.blocks():
            yield from graph_nodes(block)


def constant_value(value):
    node = value.node()
    if node.kind() != "prim::Constant":
        return None
    try:
        return value.toIValue()
    except Exception:
        return None


def check_graph(graph):
    for node in graph_nodes(graph):
        kind = node.kind()
        if kind in RANDOM_OPS:
            raise Refused("forward draws random numbers (%s): its output cannot be checked against a fixed reference" % kind)
        inputs = list(node.inputs())
        if kind in DROPOUT_OPS and len(inputs) >= 3:
            p, train = constant_value(inputs[1]), constant_value(inputs[2])
            if train is not False and p not in (0, 0.0):
                raise Refused("Dropout in training mode (KernelBench never calls eval()): random output")
        if kind == "aten::batch_norm" and len(inputs) >= 6 and constant_value(inputs[5]) is not False:
            raise Refused("BatchNorm in training mode (KernelBench never calls eval()): it normalizes with batch "
                          "statistics and updates its running statistics on every call")
        if kind == "prim::Constant":
            out = node.output()
            try:
                v = out.toIValue()
            except Exception:
                v = None
            if isinstance(v, torch.Tensor) and v.numel() > 1:
                raise Refused("forward uses a tensor that is neither a parameter nor a buffer (shape %s): a kernel "
                              "could not see its values" % list(v.shape))


# Ops whose output shape or values the trace may have fixed from the input values.
VALUE_OPS = {"aten::nonzero", "aten::masked_select", "aten::unique", "aten::_unique2", "aten::unique_consecutive",
             "aten::unique_dim", "aten::item", "aten::Int", "aten::Float", "aten::Bool", "aten::ScalarImplicit",
             "aten::argwhere", "aten::nonzero_numpy", "aten::_local_scalar_dense", "aten::tolist"}


def value_dependent(graph, caught):
    """Whether a trace may depend on the input values (then it is checked on a second draw)."""
    if any(issubclass(w.category, torch.jit.TracerWarning) for w in caught):
        return True
    for node in graph_nodes(graph):
        kind = node.kind()
        if kind in VALUE_OPS:
            return True
        if kind in ("aten::index", "aten::index_put_", "aten::index_put"):
            return True  # boolean masks are not told apart from index tensors in every torch version
    return False


# ---- tensors turned into Python values while tracing: shapes are fine, data is not ----------------

CONVERSIONS = ("__float__", "__int__", "__index__", "__bool__", "item", "tolist")
# Where a traced value may come from and still be a shape: a size, a rank, a constant.
SHAPE_SOURCES = {"aten::size", "aten::dim", "aten::numel", "prim::Constant"}


def shape_derived(value):
    """Whether a traced value is computed from tensor shapes and constants only: every path back
    through its node's inputs ends at aten::size / aten::dim / aten::numel or a constant, never at a
    graph input (prim::Param) or any other op without inputs, whose values would be data."""
    seen, stack = set(), [value]
    while stack:
        v = stack.pop()
        if v.unique() in seen:
            continue
        seen.add(v.unique())
        node = v.node()
        if node.kind() in SHAPE_SOURCES:
            continue
        inputs = list(node.inputs())
        if node.kind() == "prim::Param" or not inputs:
            return False
        stack.extend(inputs)
    return True


@contextlib.contextmanager
def conversions_watched():
    """While tracing: every tensor turned into a Python value (float(t), int(t), bool(t), t.item(),
    t.tolist(), t as an index) is recorded as {"method", "shape", "file", "line"} ("shape": whether
    its trace value is shape-derived; False when the tracer does not know it). The methods are
    restored afterwards, also on exceptions."""
    events = []
    saved = {}

    def watch(method, orig):
        def converted(self, *args, **kwargs):
            if torch._C._is_tracing():
                try:
                    ok = shape_derived(torch._C._get_value_trace(self))
                except Exception:
                    ok = False
                caller = traceback.extract_stack(limit=2)[0]
                events.append({"method": method, "shape": ok, "file": caller.filename, "line": caller.lineno})
            return orig(self, *args, **kwargs)
        return converted
    try:
        for method in CONVERSIONS:
            saved[method] = torch.Tensor.__dict__.get(method)
            setattr(torch.Tensor, method, watch(method, getattr(torch.Tensor, method)))
        yield events
    finally:
        for method, orig in saved.items():
            if orig is None:
                delattr(torch.Tensor, method)
            else:
                setattr(torch.Tensor, method, orig)


def unwatched(caught):
    """The warnings of a trace less the conversion warnings raised inside conversions_watched()'s
    wrappers (this file), which its events describe with their provenance."""
    here = os.path.abspath(__file__)
    return [w for w in caught if not (issubclass(w.category, torch.jit.TracerWarning) and "Converting a tensor to a Python"
                                      in str(w.message) and os.path.abspath(w.filename) == here)]


def refuse_data_conversions(events, caught, path):
    """Refuses a trace that turned data into a Python value in the problem's own code (a branch or a
    size taken from the values: the trace would fix one path). Shape-derived values (1/sqrt(k.size(-1)))
    pass. A conversion warning that no watched method saw (one made inside torch's C++) and that
    names the problem file refuses as before."""
    here = os.path.abspath(path)
    for e in events:
        if not e["shape"] and os.path.abspath(e["file"]) == here:
            raise Refused("data-dependent control flow at line %d (the trace would fix one path): a tensor's values "
                          "turned into a Python value (%s)" % (e["line"], e["method"]))
    for w in caught:
        msg = str(w.message)
        if issubclass(w.category, torch.jit.TracerWarning) and "Converting a tensor to a Python" in msg and \
                os.path.abspath(w.filename) == here:
            raise Refused("data-dependent control flow at line %d (the trace would fix one path): %s" % (
                w.lineno, one_line(msg, 120)))


def fingerprint(t):
    # Accumulated in fp64 without an fp64 copy of a multi-GiB input.
    if not t.numel():
        return 0.0
    return float(t.detach().sum(dtype=torch.float64)) if t.is_floating_point() or t.dtype != torch.bool else \
        float(t.detach().sum())


CHUNK = 1 << 26  # elements compared at a time: bounded temporaries for multi-GiB outputs


def _chunks(a, b):
    fa, fb = a.reshape(-1), b.reshape(-1)
    for i in range(0, fa.numel(), CHUNK):
        yield fa[i:i + CHUNK], fb[i:i + CHUNK]


def max_abs_diff(a, b):
    """max |a - b| (NaN where both are NaN counts as equal, elsewhere as infinity)."""
    if a.shape != b.shape:
        return math.inf
    worst = 0.0
    for x, y in _chunks(a, b):
        if not x.is_floating_point():
            x, y = x.double(), y.double()
        d = (x.float() - y.float()).abs() if x.dtype != torch.float64 else (x - y).abs()
        d = d.masked_fill(torch.isnan(x) & torch.isnan(y), 0)
        d = torch.nan_to_num(d, nan=math.inf)
        if d.numel():
            worst = max(worst, float(d.max()))
    return worst


def close(a, b, atol, rtol):
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    if not a.is_floating_point():
        return bool(torch.equal(a, b))
    return all(bool(torch.allclose(x, y, atol=atol, rtol=rtol, equal_nan=True)) for x, y in _chunks(a, b))


def scratch_dir(args, nbytes):
    """Where the verification tensors go: --scratch, else /dev/shm when it has room (no disk I/O for
    multi-GiB tensors), else the temp dir."""
    if args.scratch:
        return args.scratch
    try:
        st = os.statvfs("/dev/shm")
        if st.f_bavail * st.f_frsize > 2 * nbytes + (1 << 30):
            return "/dev/shm"
    except OSError:
        pass
    return None


SAMPLE = 1 << 24  # output elements the C++ check compares (evenly strided); all of smaller outputs
GEN_DTYPES = {"float32", "float64", "int32", "int64", "bool", "int8", "uint8"}


def generated(init, dtype, k):
    """How refcheck and this script both make input k (its init kind, a formula), or None (a file)."""
    if init is None or dtype not in GEN_DTYPES or init["kind"] not in ("rand", "randn", "randint", "ones", "zeros"):
        return None
    a, b = {"rand": ("low", "high"), "randint": ("low", "high"), "randn": ("mean", "std")}.get(init["kind"], (None, None))
    return {"kind": init["kind"], "seed": k + 1, "a": float(init.get(a, 0)), "b": float(init.get(b, 1))}


# The validator's filler (tool/device/fill.h, value()) in torch, for refcheck_values: the same
# formula and the same IEEE operations one at a time (int64 arithmetic wraps as uint64 does; float64
# +, -, *, tensor / tensor, sqrt and floor are exactly rounded on the CPU and on CUDA alike; no
# division by a scalar, which CUDA turns into a product with its reciprocal), so its bits are
# refcheck's. tests/device (HostFillIsPythonsRefcheckValues) compares them.
U64 = 1 << 64


def _s64(c):
    """A uint64 constant as the int64 with its bits."""
    return c - U64 if c >= 1 << 63 else c


def _srl(x, k):
    """Logical right shift of int64 bits."""
    return (x >> k) & ((1 << (64 - k)) - 1)


def _mix64(x):
    """splitmix64's finalizer (fill.h mix64): of an int64 tensor, or of a Python int."""
    if isinstance(x, int):
        x = (x + 0x9E3779B97F4A7C15) % U64
        x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) % U64
        x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) % U64
        return x ^ (x >> 31)
    x = x + _s64(0x9E3779B97F4A7C15)
    x = (x ^ _srl(x, 30)) * _s64(0xBF58476D1CE4E5B9)
    x = (x ^ _srl(x, 27)) * _s64(0x94D049BB133111EB)
    return x ^ _srl(x, 31)


def _uniform01(seed, i, lane):
    """fill.h uniform01: (k + 1) 2^-53 of element i's hash, in (0, 1]."""
    h = _mix64((i * 2 + lane) ^ _s64(_mix64(seed % U64)))
    return (_srl(h, 11) + 1).double() * 2.0 ** -53


def _horner(x, coefficients):
    p = torch.full_like(x, float.fromhex(coefficients[0]))
    for c in coefficients[1:]:
        p = p * x + float.fromhex(c)
    return p


_LN_SERIES = ["0x1.8618618618618p-5", "0x1.af286bca1af28p-5", "0x1.e1e1e1e1e1e1ep-5", "0x1.1111111111111p-4",
              "0x1.3b13b13b13b14p-4", "0x1.745d1745d1746p-4", "0x1.c71c71c71c71cp-4", "0x1.2492492492492p-3",
              "0x1.999999999999ap-3", "0x1.5555555555555p-2"]
_COS_SERIES = ["-0x1.6827863b97d97p-53", "0x1.ae7f3e733b81fp-45", "-0x1.93974a8c07c9dp-37", "0x1.1eed8eff8d898p-29",
               "-0x1.27e4fb7789f5cp-22", "0x1.a01a01a01a01ap-16", "-0x1.6c16c16c16c17p-10", "0x1.5555555555555p-5",
               "-0x1.0p-1", "0x1.0p+0"]
_SIN_SERIES = ["0x1.952c77030ad4ap-49", "-0x1.ae7f3e733b81fp-41", "0x1.6124613a86d09p-33", "-0x1.ae64567f544e4p-26",
               "0x1.71de3a556c734p-19", "-0x1.a01a01a01a01ap-13", "0x1.1111111111111p-7", "-0x1.5555555555555p-3"]


def _ln_unit(x):
    """fill.h ln_unit: ln x through the exponent bits and the atanh series."""
    bits = x.view(torch.int64)
    e = (((bits >> 52) & 0x7FF) - 1023).double()
    m = ((bits & 0x000FFFFFFFFFFFFF) | 0x3FF0000000000000).view(torch.float64)
    big = m > float.fromhex("0x1.6a09e667f3bcdp+0")
    m = torch.where(big, m * 0.5, m)
    e = torch.where(big, e + 1.0, e)
    s = (m - 1.0) / (m + 1.0)
    z = s * s
    half_ln_m = s + s * (z * _horner(z, _LN_SERIES))
    return e * float.fromhex("0x1.62e42fee00000p-1") + (e * float.fromhex("0x1.a39ef35793c76p-33") + half_ln_m * 2.0)


def _cos_2pi(w):
    """fill.h cos_2pi: cos(2 pi w) by quadrant and Taylor polynomials on [0, pi/4]."""
    t = w * 4.0
    q = torch.floor(t)
    f = t - q
    swap = f > 0.5
    x = torch.where(swap, 1.0 - f, f) * float.fromhex("0x1.921fb54442d18p+0")
    x2 = x * x
    c = _horner(x2, _COS_SERIES)
    s = x + (x * x2) * _horner(x2, _SIN_SERIES)
    quadrant = q.to(torch.int64) & 3
    magnitude = torch.where((quadrant & 1).bool() != swap, s, c)
    return torch.where((quadrant == 1) | (quadrant == 2), -magnitude, magnitude)


def filler_values(kind, seed, a, b, i):
    """fill.h value(seed, i, kind, a, b) of the int64 indices i, as float64."""
    if kind == "randn":
        r = torch.sqrt(_ln_unit(_uniform01(seed, i, 0)) * -2.0)
        return (r * _cos_2pi(_uniform01(seed, i, 1))) * b + a
    if kind in ("rand", "randint"):
        v = (1.0 - _uniform01(seed, i, 0)) * (b - a) + a
        return v if kind == "rand" else torch.clamp(torch.floor(v), max=b - 1.0)
    return torch.full(i.shape, 1.0 if kind == "ones" else 0.0, dtype=torch.float64, device=i.device)


FILL_CHUNK = 1 << 22  # elements drawn at a time (a few dozen float64 temporaries each)


def refcheck_values(gen, shape, dtype, device):
    """The input refcheck.cpp makes for `gen` (see its make_values): the validator's filler."""
    n = 1
    for d in shape:
        n *= d
    out = torch.empty(n, dtype=dtype, device=device)
    for a in range(0, n, FILL_CHUNK):
        i = torch.arange(a, min(n, a + FILL_CHUNK), dtype=torch.int64, device=device)
        out[a:a + i.numel()] = filler_values(gen["kind"], gen["seed"], gen["a"], gen["b"], i).to(dtype)
    return out.reshape(shape)


def write_raw(t, path):
    """Raw little-endian bytes, row-major: what the task's file init kind reads."""
    flat = t.detach().cpu().contiguous().reshape(-1)
    if flat.dtype == torch.bfloat16:
        flat = flat.view(torch.int16)
    flat.numpy().tofile(path)


def dims_with_names(shapes, mod):
    """Names for sizes that repeat across the tensors: the problem's constant of that value when
    there is one, else d<size>. Returns {size: name}."""
    count = {}
    for shape in shapes:
        for s in shape:
            count[s] = count.get(s, 0) + 1
    consts = {}
    for k, v in vars(mod).items():
        if isinstance(v, int) and not isinstance(v, bool) and not k.startswith("_") and re.match(r"^[A-Za-z_]\w*$", k):
            consts.setdefault(v, k)
    names, used = {}, set()
    for s, c in sorted(count.items()):
        if c < 2 or s <= 1:
            continue
        name = consts.get(s, "d%d" % s)
        if name in used:
            name = "d%d" % s
        used.add(name)
        names[s] = name
    return names


def dtype_of(t, what):
    if t.dtype not in DTYPES:
        raise Refused("unsupported dtype %s (%s)" % (str(t.dtype).replace("torch.", ""), what))
    if t.dim() > MAX_DIMS:
        raise Refused("%s has %d dimensions; the kernel ABI allows %d" % (what, t.dim(), MAX_DIMS))
    return DTYPES[t.dtype]


# ---- dimension names by role (perturbation on the meta device) --------------------------------------

META_FACTORIES = ("empty", "zeros", "ones", "rand", "randn", "randint", "full", "tensor", "arange", "eye",
                  "empty_like", "zeros_like", "ones_like", "rand_like", "randn_like", "randint_like", "linspace")


@contextlib.contextmanager
def on_meta():
    """Tensor factories make meta tensors (shapes only): the model and get_inputs() at any size, free."""
    saved = {}
    for name in META_FACTORIES:
        orig = getattr(torch, name, None)
        if orig is None:
            continue
        saved[name] = orig

        def meta(*a, __orig=orig, **k):
            k["device"] = "meta"
            return __orig(*a, **k)
        setattr(torch, name, meta)
    try:
        yield
    finally:
        for name, orig in saved.items():
            setattr(torch, name, orig)


def meta_shapes(mod):
    """Shapes of the inputs, parameters and buffers, and outputs, in task order, built on meta."""
    with on_meta(), torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = mod.Model(*mod.get_init_inputs())
        raw = list(mod.get_inputs())
        ins = [x for x in raw if isinstance(x, torch.Tensor)]
        outs = flat_outputs(model(*raw))
    return [list(t.shape) for t in ins + [t for _, t in slots_of(model)] + outs]


def size_constants(mod):
    """(name, setter, value) of every module-level integer (and integer in a tuple) that may be a size."""
    out = []
    for k, v in list(vars(mod).items()):
        if k.startswith("_") or not re.match(r"^[A-Za-z_]\w*$", k):
            continue
        if isinstance(v, int) and not isinstance(v, bool) and v > 1:
            out.append((k, (lambda val, k=k: setattr(mod, k, val)), v))
        elif isinstance(v, (tuple, list)) and v and all(isinstance(e, int) and not isinstance(e, bool) for e in v):
            for i, e in enumerate(v):
                if e > 1:
                    def put(val, k=k, i=i, v=v):
                        new = list(v)
                        new[i] = val
                        setattr(mod, k, type(v)(new))
                    out.append(("%s_%d" % (k, i), put, e))
    return out[:48]


def role_names(mod, shapes):
    """Names each dimension after the problem's constant that it follows: a dimension of size v is
    named k when it equals constant k (= v) and doubles with it (checked on the meta device, one
    constant at a time); equal values of different roles stay apart. Dimensions that follow no
    constant alone stay literal. Returns ([[name or int per dim] per tensor], {name: value}, note)."""
    try:
        base = meta_shapes(mod)
    except Exception as e:
        return None, None, "shapes on the meta device failed (%s: %s)" % (type(e).__name__, one_line(e, 120))
    if base != [list(s) for s in shapes]:
        return None, None, "shapes on the meta device differ from the real ones"
    claims = {}  # (tensor, axis) -> [constant names]

    def vary(group, v):
        """The shapes with the constants of `group` (all equal to v) doubled, or None."""
        for _, put in group:
            put(v * 2)
        try:
            moved = meta_shapes(mod)
        except Exception:
            return None
        finally:
            for _, put in group:
                put(v)
        return moved if [len(s) for s in moved] == [len(s) for s in base] else None

    def claim(name, moved, v):
        for i, (a, b) in enumerate(zip(base, moved)):
            for j, (x, y) in enumerate(zip(a, b)):
                if x == v and y == 2 * v:
                    claims.setdefault((i, j), []).append(name)
    consts = size_constants(mod)
    failed = []
    for name, put, v in consts:
        moved = vary([(name, put)], v)
        if moved is None:
            failed.append((name, put, v))
        else:
            claim(name, moved, v)
    # Constants that must change together (out_channels and bias_shape = (out_channels, 1, 1)): each
    # failed one is varied with another failed one of the same value; the first in the file names them.
    for name, put, v in list(failed):
        for other, put2, v2 in failed:
            if other != name and v2 == v:
                moved = vary([(name, put), (other, put2)], v)
                if moved is not None:
                    claim(name, moved, v)
                    break
    failed = [n for n, _, _ in failed if not any(n in c for c in claims.values())]
    named = [[(claims[(i, j)][0] if (i, j) in claims and s > 1 else s) for j, s in enumerate(shape)]
             for i, shape in enumerate(base)]
    bound = {}
    for i, shape in enumerate(base):
        for j, s in enumerate(shape):
            if isinstance(named[i][j], str):
                bound[named[i][j]] = s
    note = "constants that could not be varied: " + ", ".join(failed) if failed else ""
    return named, bound, note


# ---- FLOPs of the traced graph's convolutions and matmuls ---------------------------------------------

CONV_OPS = {"aten::_convolution", "aten::convolution", "aten::conv1d", "aten::conv2d", "aten::conv3d",
            "aten::conv_transpose1d", "aten::conv_transpose2d", "aten::conv_transpose3d", "aten::cudnn_convolution",
            "aten::mkldnn_convolution"}
MATMUL_OPS = {"aten::mm", "aten::bmm", "aten::addmm", "aten::matmul", "aten::linear", "aten::baddbmm",
              "aten::addbmm", "aten::mv", "aten::addmv", "aten::einsum"}


def _sizes(value):
    t = value.type()
    if not isinstance(t, torch._C.TensorType):
        return None
    try:
        s = t.sizes()
    except Exception:
        return None
    return [int(x) for x in s] if s is not None else None


def _prod(xs):
    p = 1
    for x in xs:
        p *= x
    return p


def graph_flops(graph):
    """The task's "flops": the fewest floating-point operations of the known algorithms (tool/sol/sol.h),
    2 * multiply-adds of the matmuls and convolutions (transposed and grouped too), from the shapes the
    trace recorded. A convolution counts at Winograd's limit, one multiply-add per output and input
    channel of its group (per input and output channel for a transposed one): its direct count divided
    by its kernel window, so that the compute floor stays a lower bound for Winograd and FFT kernels.
    Returns (total, {kind: flops})."""
    by_kind = {}
    for node in graph_nodes(graph):
        kind = node.kind()
        if kind not in CONV_OPS and kind not in MATMUL_OPS:
            continue
        ins = [_sizes(v) for v in node.inputs()]
        out = _sizes(node.output()) if node.outputs() else None
        if out is None:
            continue
        macs = 0
        if kind in CONV_OPS:
            x, w = ins[0], ins[1]
            if not w or not x:
                continue
            transposed = "transpose" in kind
            if kind in ("aten::_convolution", "aten::convolution"):
                transposed = constant_value(list(node.inputs())[6]) is True
            # weight: [C_out, C_in/groups, k...] (transposed: [C_in, C_out/groups, k...]); the window
            # w[2:] is left out (Winograd's limit, see above)
            macs = (_prod(x) if transposed else _prod(out)) * w[1]
            kind = "conv_transpose" if transposed else "conv"
        elif kind == "aten::einsum":
            continue  # the contraction is not in the shapes alone
        else:
            a, b = {"aten::addmm": (1, 2), "aten::baddbmm": (1, 2), "aten::addbmm": (1, 2),
                    "aten::addmv": (1, 2)}.get(kind, (0, 1))
            if ins[a] is None or not ins[a]:
                continue
            k = ins[a][-1]
            if kind == "aten::addbmm":
                macs = _prod(ins[a]) * ins[b][-1]
            else:
                macs = _prod(out) * k
            kind = kind.split("::")[1]
        by_kind[kind] = by_kind.get(kind, 0) + 2 * macs
    return sum(by_kind.values()), by_kind


# ---- the tolerance: the reference's own error (fp32 vs fp64) ------------------------------------------

TOL_FLOOR, TOL_CEIL = 1e-4, 1e-2  # KernelBench checks fp32 at 1e-2: never looser


def allclose_t(a, b):
    """The smallest t with which a passes the judge's rule against b (the fp64 one) at atol = rtol = t
    (tool/device/tolerance.h, s the RMS of b's finite elements): per element |a - b| <= t * min(1, s)
    + t * |b| (t * (1 + |b|) where s is 0), and rms(a - b) <= t * s; and max |a - b|."""
    sum_sq, finite = 0.0, 0
    for _, y in _chunks(a, b):
        f = torch.isfinite(y)
        sum_sq, finite = sum_sq + float((y[f] * y[f]).sum()), finite + int(f.sum())
    s = math.sqrt(sum_sq / finite) if finite else 0.0
    floor = min(1.0, s) if 0 < s < math.inf else 1.0
    worst = biggest = sum_d2 = 0.0
    for x, y in _chunks(a, b):
        d = (x.double() - y).abs()
        d = torch.nan_to_num(d.masked_fill(torch.isnan(x) & torch.isnan(y), 0), nan=math.inf)
        if d.numel():
            biggest = max(biggest, float(d.max()))
            worst = max(worst, float((d / (floor + y.abs())).max()))
            sum_d2 += float((d[torch.isfinite(d)] ** 2).sum())
    if 0 < s < math.inf and a.numel():
        worst = max(worst, math.sqrt(sum_d2 / a.numel()) / s)
    return worst, biggest


def one_digit_up(x):
    if x <= 0:
        return 0.0
    e = math.floor(math.log10(x))
    m = math.ceil(round(x / 10 ** e, 9))
    return float("%de%d" % (m, e)) if m < 10 else float("1e%d" % (e + 1))


def tolerance_from(outputs, measured):
    """The task's tolerance: (atol, rtol, policy), atol None for exact outputs."""
    kinds = {o.dtype for o in outputs}
    if all(not o.is_floating_point() for o in outputs):
        return None, None, "integer/bool outputs: compared exactly"
    if kinds & {torch.float16, torch.bfloat16}:
        return 1e-2, 1e-2, "fp16/bf16 outputs: atol = rtol = 1e-2 (KernelBench's own check)"
    if measured is None:
        return TOL_FLOOR, TOL_FLOOR, ("fp32 outputs, fp64 run unavailable: atol = rtol = 1e-4 (strict fp32, TF32 "
                                      "off; KernelBench checks at 1e-2)")
    t = min(max(one_digit_up(measured * 10), TOL_FLOOR), TOL_CEIL)
    return t, t, ("fp32 outputs, strict fp32 (TF32 off): 10x the reference's own error against fp64 (t %.2g by the "
                  "judge's rule, relative to each output's scale), rounded up to one digit, within [1e-4, 1e-2] "
                  "(KernelBench checks at 1e-2)" % measured)


# The precision policy (task.json "precision", KEVO_PRECISION_LIST in tool/task/precision.h): kernelevo
# passes it with its TF32 flags as --precision; the default is PyTorch's own.
DEFAULT_PRECISION = {"task": None, "policy": "pytorch", "cudnn_tf32": True, "matmul_tf32": False}
POLICY_MARGIN = 3  # a kernel computing as the policy does may differ from strict fp32 by this times its error


def policy_error(model, call_args, strict, precision):
    """The policy's own error on this problem: the model as the timed reference runs it (the policy's
    TF32 flags; bf16: the model and inputs in bfloat16) against the strict fp32 outputs, in the judge's
    terms (allclose_t). None where it cannot be measured."""
    if not all(o.dtype == torch.float32 for o in strict):
        return None
    saved = (torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32)
    try:
        torch.backends.cudnn.allow_tf32 = bool(precision["cudnn_tf32"])
        torch.backends.cuda.matmul.allow_tf32 = bool(precision["matmul_tf32"])
        with torch.no_grad():
            if precision["policy"] == "bf16":
                import copy
                low = copy.deepcopy(model).to(torch.bfloat16)
                out = flat_outputs(low(*[x.to(torch.bfloat16) if isinstance(x, torch.Tensor) and x.is_floating_point() else x
                                         for x in call_args]))
                del low
            else:
                out = flat_outputs(model(*call_args))
        if len(out) != len(strict):
            return None
        return max([allclose_t(a.float(), b.double())[0] for a, b in zip(out, strict)] + [0.0])
    except Exception:
        return None
    finally:
        torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32 = saved


def with_policy(atol, rtol, text, policy_err, precision):
    """The tolerance widened to admit the policy's own error (POLICY_MARGIN times it, one digit up),
    never narrowed; the text says so."""
    name = precision["policy"]
    if atol is None or not policy_err:
        return atol, rtol, text + ("; precision %s: its own error against strict fp32 is %s" % (
            name, "0 here" if policy_err == 0 else "not measured")) if atol is not None else text
    t = min(one_digit_up(POLICY_MARGIN * policy_err), 0.5)
    if t <= max(atol, rtol):
        return atol, rtol, text + "; precision %s: its own error against strict fp32 (t %.2g) fits" % (name, policy_err)
    return t, t, text + ("; widened to %g for precision %s: %dx its own error against strict fp32 (t %.2g by the judge's "
                         "rule), rounded up to one digit" % (t, name, POLICY_MARGIN, policy_err))


def fp64_error(model, call_args, eager):
    """The fp32 model's error against itself in fp64 on the same inputs: (allclose t, max |diff|, reason).
    When the fp64 copies do not fit (a multi-GiB problem), the first 1/8 (then 1/64) of a leading
    dimension that all tensor inputs and outputs share is measured, fp32 and fp64 alike on it."""
    if not all(o.dtype == torch.float32 for o in eager):
        return None, None, "outputs are not all float32"
    lead = {x.shape[0] if x.dim() else None for x in call_args if isinstance(x, torch.Tensor)}
    lead |= {o.shape[0] if o.dim() else None for o in eager}
    fractions = [1] + ([8, 64] if len(lead) == 1 and None not in lead and next(iter(lead)) >= 8 else [])
    why = ""
    for f in fractions:
        try:
            if f == 1:
                return _fp64_error(model, call_args, eager) + ("",)
            n = max(1, next(iter(lead)) // f)
            part = [x[:n] if isinstance(x, torch.Tensor) else x for x in call_args]
            with torch.no_grad():
                ref = flat_outputs(model(*part))
            t, m = _fp64_error(model, part, ref)
            return t, m, "measured on the first %d of %d along dim 0 (%s)" % (n, next(iter(lead)), why)
        except Exception as e:
            why = "fp64 run failed: %s: %s" % (type(e).__name__, one_line(e, 120))
            if torch.cuda.is_available():
                torch.cuda.empty_cache()
    return None, None, why


def _fp64_error(model, call_args, eager):
    import copy
    m64 = copy.deepcopy(model).double()
    args64 = [x.double() if isinstance(x, torch.Tensor) and x.is_floating_point() else x for x in call_args]
    with torch.no_grad():
        out64 = flat_outputs(m64(*args64))
    del m64, args64
    if len(out64) != len(eager) or any(a.shape != b.shape for a, b in zip(eager, out64)):
        raise RuntimeError("the fp64 model's outputs differ in shape")
    errs = [allclose_t(a, b) for a, b in zip(eager, out64)]
    return max([e[0] for e in errs] + [0.0]), max([e[1] for e in errs] + [0.0])


# ---- graph.py: what the model computes, as the kernel receives it --------------------------------------

_NOT_RENAMED = {"torch", "ops", "CONSTANTS", "Tensor", "self", "annotate", "None", "True", "False", "int", "float",
                "bool", "str", "List", "Optional", "Tuple", "def", "return", "if", "else", "for", "in", "and", "or",
                "not", "is", "while", "range", "len"}


def graph_code(traced, arg_names):
    """The traced forward as Python-like code, its arguments renamed to the task's input names and the
    scalar constants written as values. Returns (code, {constant: value}, renamed)."""
    try:
        code, consts = traced.code_with_constants
        mapping = dict(consts.const_mapping)
    except Exception:
        code, mapping = traced.code, {}
    values = {}
    for k, v in mapping.items():
        if isinstance(v, torch.Tensor):
            v = v.item() if v.numel() == 1 else None
        if isinstance(v, (int, float, bool)):
            values[k] = v
    code = re.sub(r"CONSTANTS\.(c\d+)", lambda m: repr(values[m.group(1)]) if m.group(1) in values else m.group(0), code)
    head = re.search(r"def forward\(self,(.*?)\)\s*->", code, re.S)
    old = [a.split(":")[0].strip() for a in head.group(1).split(",")] if head else []
    if len(old) != len(arg_names):
        return code, values, False
    rename = dict(zip(old, arg_names))
    taken = set(arg_names)
    used = set(re.findall(r"[A-Za-z_]\w*", code))

    def fresh(n):
        i = 0
        while True:
            i += 1
            c = "%s_%d" % (n, i)
            if c not in used and c not in taken:
                used.add(c)
                return c
    for ident in sorted(used):
        if ident in taken and ident not in rename and ident not in _NOT_RENAMED:
            rename[ident] = fresh(ident)  # a local of the trace that has a task input's name

    def sub(m):
        return rename.get(m.group(0), m.group(0)) if m.group(0) not in _NOT_RENAMED else m.group(0)
    # Identifiers only (not attributes after a dot, not inside strings).
    out = []
    for part in re.split(r"(\"[^\"]*\"|'[^']*')", code):
        out.append(part if part[:1] in ("'", '"') else re.sub(r"(?<![\w.])[A-Za-z_]\w*", sub, part))
    return "".join(out), values, True


def graph_file(name, path, traced, specs, outputs, shape_of, bound, kinds):
    code, values, renamed = graph_code(traced, [s["name"] for s in specs])
    lines = ["# KernelBench problem %s: its forward as traced by torch.jit.trace (torch %s), the model's weights" % (
                 os.path.basename(path), torch.__version__),
             "# passed in as arguments. The kernel receives these tensors, in this order:"]
    for s in specs:
        role = "parameter/buffer %s" % s["slot"] if "slot" in s else "input"
        lines.append("#   %s: %s[%s]  (%s)" % (s["name"], s["dtype"][0], ", ".join(map(str, shape_of(s["tensor"]))), role))
    lines.append("# and writes its outputs:")
    for n, o in outputs:
        lines.append("#   %s: %s[%s]" % (n, DTYPES[o.dtype][0], ", ".join(map(str, shape_of(o)))))
    if bound:
        lines.append("# Sizes: " + ", ".join("%s = %d" % kv for kv in sorted(bound.items())))
    if values:
        lines.append("# Scalar constants of the trace, written in place: " + ", ".join(
            "CONSTANTS.%s = %r" % kv for kv in sorted(values.items())))
    if not renamed:
        lines.append("# (the arguments below are in the order above: %s)" % ", ".join(s["name"] for s in specs))
    lines.append("# Comparisons with the reference run in strict fp32 (TF32 off).")
    if kinds:
        lines.append("# Convolution/matmul FLOPs (the fewest of the known algorithms; a convolution at Winograd's limit, "
                     "one multiply-add per output and input channel): " + ", ".join("%s %d" % kv for kv in sorted(kinds.items())))
    return "\n".join(lines) + "\n" + code.rstrip() + "\n"


class Phases:
    """One progress line per phase on stdout: {"progress": {"name", "phase", "seconds"}}."""

    def __init__(self, name):
        self.name, self.t = name, time.time()
        self.seconds = {}

    def done(self, phase):
        now = time.time()
        s = round(now - self.t, 3)
        self.t = now
        self.seconds[phase] = round(self.seconds.get(phase, 0) + s, 3)
        print(json.dumps({"progress": {"name": self.name, "phase": phase, "seconds": s}}), flush=True)


# ---- one problem ----------------------------------------------------------------------------------

BIG_BYTES = 2 << 30  # problems whose inputs exceed this take turns on the GPU (memory)


@contextlib.contextmanager
def big_problem_turn(args, nbytes):
    """On the GPU, problems with multi-GiB tensors run one at a time across the import's workers."""
    if args.device_kind != "cuda" or nbytes < BIG_BYTES:
        yield
        return
    with open(os.path.join(args.out, ".big-problem.lock"), "w") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def import_one(path, args, reference_source, max_numel, joint=False):
    phases = Phases(task_name(path))
    src, mod = load_problem(path)
    shrunk = {}
    if max_numel > 0:
        shrunk = shrink(mod, max_numel, joint)
    phases.done("load")
    try:
        nbytes = sum(x.numel() * x.element_size() for x in _meta_inputs(mod))
    except Exception:
        nbytes = 0
    with big_problem_turn(args, nbytes):
        return _import_one(path, args, reference_source, src, mod, shrunk, phases)


def kernelevo_python(given=""):
    """The folder holding the kernelevo Python package (export_model): --kernelevo-python as the tool
    passes it, else the installed share/kernelevo/python beside this share/kernelevo/kernelbench, else
    the source tree's python/."""
    here = os.path.dirname(os.path.abspath(__file__))
    for c in (given, os.path.join(here, "..", "python"), os.path.join(here, "..", "..", "python")):
        if c and os.path.isfile(os.path.join(c, "kernelevo", "model_export.py")):
            return os.path.abspath(c)
    raise RuntimeError("the kernelevo Python package (kernelevo/model_export.py) was not found %s" % (
        "in " + given if given else "beside the importer (%s): reinstall kernelevo" % here))


def import_model(path, args, max_numel, joint=False):
    """A problem as a whole model (level 3): built and its inputs drawn as _import_one does, then
    kernelevo.export_model traces it, times its regions and writes OUT/NAME/ as a model folder
    (python/kernelevo/model_plan.md: plan.json, plan.md, regions/TASK/ per region worth a kernel).
    A region that cannot be imported faithfully (BatchNorm or Dropout in training mode, ...) stays
    in PyTorch with its reason in the plan; only a model that cannot be traced at all is refused."""
    name = task_name(path)
    phases = Phases(name)
    src, mod = load_problem(path)
    changed = shrink(mod, max_numel, joint) if max_numel > 0 else {}
    shrunk_note = " (with sizes shrunk by --max-numel: %s)" % ", ".join(
        "%s=%s" % (k, v[1]) for k, v in changed.items()) if changed else ""
    phases.done("load")
    t0 = time.time()
    model = build_model(mod, shrunk_note).to(torch.device(args.device))
    raw, _ = draw_inputs(mod, args, 42, shrunk_note)
    for i, x in enumerate(raw):
        if not isinstance(x, torch.Tensor):
            raise Refused("input %d is a %s: a model import takes tensor inputs only" % (i, type(x).__name__))
    phases.done("build")
    sys.path.insert(0, kernelevo_python(getattr(args, "kernelevo_python", "")))
    from kernelevo.model_export import export_model
    from kernelevo.torch_task import ExportError
    p = getattr(args, "precision", None) or DEFAULT_PRECISION
    try:
        plan = export_model(model, tuple(raw), os.path.join(args.out, name), name=name, device=args.device, quiet=True,
                            precision={k: p[k] for k in ("policy", "cudnn_tf32", "matmul_tf32")},
                            source=os.path.abspath(path))
    except ExportError as e:
        raise Refused("the model cannot be exported%s: %s" % (shrunk_note, one_line(e)))
    phases.done("export")
    result = {"source": os.path.abspath(path), "name": name, "status": "ok", "kind": "model",
              "plan": os.path.relpath(plan, args.out), "phases": phases.seconds, "seconds": time.time() - t0}
    if changed:
        result["shrunk"] = {k: v[1] for k, v in changed.items()}
    return result


def _meta_inputs(mod):
    with on_meta():
        return [x for x in mod.get_inputs() if isinstance(x, torch.Tensor)]


def build_model(mod, shrunk_note=""):
    """The model, exactly as KernelBench builds it: seed 42, get_init_inputs(), seed 42, Model(*init)
    on the CPU."""
    try:
        torch.manual_seed(42)
        init = mod.get_init_inputs()
        torch.manual_seed(42)
        model = mod.Model(*init)
    except Exception as e:
        raise (ShrinkRefused if shrunk_note else Refused)("constructing the model failed%s: %s: %s" % (shrunk_note, type(e).__name__, one_line(e)))
    if not isinstance(model, nn.Module):
        raise Refused("Model(...) is not an nn.Module")
    return model


def draw_inputs(mod, args, seed, shrunk_note=""):
    """get_inputs() after torch.manual_seed(seed), recorded (Recorder): (inputs, recorder). On the GPU
    it draws there directly (drawing multi-GiB inputs on the CPU and copying them took most of an
    import); the values differ from KernelBench's CPU draws, the distribution does not, and an input
    stored as a file is the tensor that was used."""
    device = torch.device(args.device)
    for where in ([device, None] if args.device_kind == "cuda" else [None]):
        rec = Recorder(where)
        torch.manual_seed(seed)
        with rec.active():
            try:
                return list(mod.get_inputs()), rec
            except Exception as e:
                # Drawn on the GPU, a tensor may meet one made on the CPU (torch.arange): on the CPU then.
                failure = e
    e = failure
    raise (ShrinkRefused if shrunk_note else Refused)("get_inputs() failed%s: %s: %s" % (shrunk_note, type(e).__name__, one_line(e)))


def _import_one(path, args, reference_source, src, mod, changed, phases, name=None):
    """One problem; `name` (default: from the file name) is the task's name. python/kernelevo's
    export_task() calls this with a module object of its own (a live nn.Module, no problem file)."""
    t0 = time.time()
    name = name or task_name(path)
    result = {"source": os.path.abspath(path), "name": name}
    notes = []
    shrunk_note = ""
    if changed:
        result["shrunk"] = {k: v[1] for k, v in changed.items()}
        shrunk_note = " (with sizes shrunk by --max-numel: %s)" % ", ".join("%s=%s" % (k, v[1]) for k, v in changed.items())
        notes.append("sizes shrunk for this machine: " + ", ".join("%s %s->%s" % (k, a, b) for k, (a, b) in changed.items()))
    device = torch.device(args.device)

    model = build_model(mod, shrunk_note)
    for m in model.modules():
        if isinstance(m, nn.modules.batchnorm._BatchNorm) and m.training:
            raise Refused("BatchNorm in training mode (KernelBench never calls eval()): it normalizes with batch "
                          "statistics and updates its running statistics on every call")
        if isinstance(m, nn.modules.dropout._DropoutNd) and m.training and m.p > 0:
            raise Refused("Dropout (p=%g) in training mode (KernelBench never calls eval()): random output" % m.p)
    model = model.to(device)
    slots = slots_of(model)
    for n, t in slots:
        dtype_of(t, "parameter " + n)
    phases.done("build")

    def draw(seed):
        return draw_inputs(mod, args, seed, shrunk_note)

    raw, rec = draw(42)
    raw_values = [None if isinstance(x, torch.Tensor) else x for x in raw]
    tensor_pos = [i for i, x in enumerate(raw) if isinstance(x, torch.Tensor)]
    if not tensor_pos:
        raise Refused("get_inputs() returns no tensor")
    for i, x in enumerate(raw):
        if not isinstance(x, torch.Tensor) and not isinstance(x, (int, float, bool, type(None), str)):
            raise Refused("input %d is a %s (only tensors and plain numbers are supported)" % (i, type(x).__name__))
    if len(tensor_pos) + len(slots) > MAX_TENSORS:
        raise Refused("%d inputs plus %d parameters and buffers: a task holds at most %d inputs" % (
            len(tensor_pos), len(slots), MAX_TENSORS))
    if len(tensor_pos) < len(raw):
        notes.append("non-tensor inputs fixed as constants: " + ", ".join(repr(raw[i]) for i in range(len(raw)) if i not in tensor_pos))

    try:
        params = list(inspect.signature(model.forward).parameters.values())
        pnames = [p.name for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    except (TypeError, ValueError):
        pnames = []
    used = set()
    input_specs = []
    for k, i in enumerate(tensor_pos):
        x = raw[i]
        what = "input %s" % (pnames[i] if i < len(pnames) else i)
        dt = dtype_of(x, what)
        init = rec.init_of(x)
        # A distribution the task can state for this dtype; anything else is stored as it was drawn.
        if init is not None and init["kind"] in ("rand", "randn") and not x.is_floating_point():
            init = None
        if init is not None and init["kind"] == "randint" and (x.is_floating_point() or (
                x.dtype == torch.bool and (init["low"], init["high"]) != (0, 2))):
            init = None
        input_specs.append({"name": identifier(pnames[i] if i < len(pnames) else "x%d" % k, used), "dtype": dt,
                            "tensor": x, "init": init})
    slot_specs = [{"name": identifier(n.replace(".", "_"), used), "dtype": DTYPES[t.dtype], "tensor": t,
                   "init": None, "slot": n} for n, t in slots]

    call_args = [x.to(device) if isinstance(x, torch.Tensor) else x for x in raw]
    dev_inputs = [call_args[i] for i in tensor_pos]
    slot_values = [t.detach() for _, t in slots]
    phases.done("inputs")

    # Eager, as KernelBench runs it.
    before = [fingerprint(x) for x in dev_inputs]
    with torch.no_grad():
        try:
            eager = flat_outputs(model(*call_args))
        except Refused:
            raise
        except Exception as e:
            raise (ShrinkRefused if shrunk_note else Refused)("the model's forward failed%s: %s: %s" % (shrunk_note, type(e).__name__, one_line(e)))
    if [fingerprint(x) for x in dev_inputs] != before:
        raise Refused("forward modifies its input in place")
    for k, o in enumerate(eager):
        dtype_of(o, "output %d" % k)
    if len(eager) > MAX_TENSORS:
        raise Refused("%d outputs: a task holds at most %d" % (len(eager), MAX_TENSORS))
    phases.done("eager")

    # Trace the functional wrapper: inputs, then parameters and buffers.
    wrapper = Functional(model, call_args, tensor_pos, [n for n, _ in slots])
    with torch.no_grad(), warnings.catch_warnings(record=True) as caught, conversions_watched() as events:
        warnings.simplefilter("always")
        try:
            traced = torch.jit.trace(wrapper, tuple(dev_inputs + slot_values), check_trace=False)
        except Exception as e:
            raise Refused("tracing failed: %s: %s" % (type(e).__name__, one_line(e)))
    # A tensor turned into a Python value in the problem's own code: a branch or a size taken from
    # the data. (PyTorch's own shape checks convert too; those, and sizes, depend on shapes only.)
    refuse_data_conversions(events, caught, path)
    check_graph(traced.graph)
    phases.done("trace")
    verify = {}
    if not args.refcheck:
        # Without the C++ check (which runs the trace on these inputs against eager), the trace is
        # checked here.
        with torch.no_grad():
            again = flat_outputs(traced(*dev_inputs, *slot_values))
        if len(again) != len(eager) or not all(close(a, b, 0, 0) or close(a, b, 1e-5, 1e-5) for a, b in zip(again, eager)):
            raise Refused("the traced graph does not reproduce the model on the recorded inputs")
        del again
    # A second draw of inputs shows a trace that baked in value-dependent decisions. Those come with a
    # tracer warning (a tensor turned into a Python value) or an op whose output shape depends on the
    # values; without either the trace is value-independent and the second full run is skipped.
    # Conversions the watched methods saw count only when their value is data, not a shape.
    suspicious = value_dependent(traced.graph, unwatched(caught)) or any(not e["shape"] for e in events)
    if suspicious:
        raw2, _ = draw(43)
        call2 = [x.to(device) if isinstance(x, torch.Tensor) else x for x in raw2]
        with torch.no_grad():
            eager2 = flat_outputs(model(*call2))
            traced2 = flat_outputs(traced(*[call2[i] for i in tensor_pos], *slot_values))
        trace_diff = max([max_abs_diff(a, b) for a, b in zip(traced2, eager2)] + [0.0])
        if len(traced2) != len(eager2) or not all(close(a, b, 1e-5, 1e-5) for a, b in zip(traced2, eager2)):
            raise Refused("the traced graph depends on the input values (data-dependent control flow): max |diff| %g on "
                          "other inputs" % trace_diff)
        del raw2, call2, eager2, traced2
        verify["trace_max_abs_diff_other_inputs"] = trace_diff
    else:
        verify["second_draw"] = ("skipped: no tracer warning, no tensor's values turned into a Python value (sizes "
                                 "only) and no op whose output depends on the values")
    phases.done("check")

    # The reference's own error: the model in fp64 on the same inputs (strict fp32, TF32 off).
    measured, max_abs, why = fp64_error(model, call_args, eager)
    if measured is not None:
        verify["fp64_allclose_t"] = measured
        verify["fp64_max_abs_diff"] = max_abs
        if why:
            verify["fp64_note"] = why
    else:
        verify["fp64"] = "skipped: " + why
    atol, rtol, policy = tolerance_from(eager, measured)
    precision = getattr(args, "precision", None) or DEFAULT_PRECISION
    perr = policy_error(model, call_args, eager, precision)
    if perr is not None:
        verify["precision_allclose_t"] = perr
    atol, rtol, policy = with_policy(atol, rtol, policy, perr, precision)
    if args.device_kind == "cuda":
        torch.cuda.empty_cache()
    phases.done("fp64")
    flops, flops_by_kind = graph_flops(traced.graph)

    # The task directory.
    out_dir = os.path.join(args.out, name)
    tmp_dir = out_dir + ".tmp"
    shutil.rmtree(tmp_dir, ignore_errors=True)
    os.makedirs(tmp_dir)
    traced.save(os.path.join(tmp_dir, "model.pt"))
    for spec in input_specs + slot_specs:
        if spec["init"] is None:
            spec["init"] = {"kind": "file", "path": spec["name"] + ".bin"}
            write_raw(spec["tensor"], os.path.join(tmp_dir, spec["name"] + ".bin"))
    derived = [s["name"] for s in input_specs if s["init"]["kind"] == "file"]
    if derived:
        notes.append("inputs computed from random values, stored as fixed files: " + ", ".join(derived))

    out_names = ["out"] if len(eager) == 1 else ["out%d" % k for k in range(len(eager))]
    out_names = [identifier(n, used) for n in out_names]
    shapes = [list(s["tensor"].shape) for s in input_specs + slot_specs] + [list(o.shape) for o in eager]
    named, bound, naming_note = role_names(mod, shapes)
    if naming_note:
        notes.append("dimension names: " + naming_note + ("" if named else "; named by value instead"))
    if named is None:
        dim_names = dims_with_names(shapes, mod)
        bound = {v: k for k, v in dim_names.items()}
        named = [[dim_names.get(s, s) for s in shape] for shape in shapes]
    named_of = {}
    for shape, names in zip([s["tensor"] for s in input_specs + slot_specs] + eager, named):
        named_of[id(shape)] = names

    def shape_json(t):
        return list(named_of[id(t)])

    task = {
        "name": name,
        "description": "KernelBench problem %s, imported by kernelevo import kernelbench (torch %s)%s" % (
            os.path.basename(path), torch.__version__, "; " + "; ".join(notes) if notes else ""),
        "reference": {"source": os.path.relpath(reference_source, out_dir), "function": "kevo_kb::forward",
                      "signature": "vector", "setup": "kevo_kb::setup", "arg": "model.pt"},
        "inputs": [{"name": s["name"], "dtype": s["dtype"][0], "shape": shape_json(s["tensor"]), "init": s["init"]}
                   for s in input_specs + slot_specs],
        "outputs": [{"name": n, "dtype": DTYPES[o.dtype][0], "shape": shape_json(o)} for n, o in zip(out_names, eager)],
        "tolerance": {"policy": policy},
        **({"precision": precision["task"]} if precision.get("task") is not None else {}),
    }
    task["reference"]["show"] = [
        {"file": "problem.py", "language": "python",
         "title": "The PyTorch model (KernelBench problem file; inputs come from get_inputs(), parameters follow "
                  "PyTorch's default initialisation)"},
        {"file": "graph.py", "language": "python",
         "title": "What it computes, as traced: the kernel's inputs in order, with the weights named as the kernel "
                  "receives them"}]
    if atol is not None:
        task["tolerance"].update({"atol": atol, "rtol": rtol})
    if flops > 0:
        task["flops"] = str(flops)
    if bound:
        task["shapes"] = [dict(sorted(bound.items()))]
    with open(os.path.join(tmp_dir, "task.json"), "w") as f:
        json.dump(task, f, indent=2)
        f.write("\n")
    with open(os.path.join(tmp_dir, "problem.py"), "w", encoding="utf-8") as f:
        f.write(src)
    with open(os.path.join(tmp_dir, "graph.py"), "w", encoding="utf-8") as f:
        f.write(graph_file(name, path, traced, input_specs + slot_specs, list(zip(out_names, eager)), shape_json,
                           bound, flops_by_kind))
    phases.done("write")

    # Self-verification: the C++ reference (kernelevo-refcheck) against the Python model. Inputs that
    # a formula can make are made on both sides (refcheck_values; no multi-GiB files), the others
    # are files; the Python outputs on those inputs are compared at up to SAMPLE elements each.
    del call_args, dev_inputs, slot_values, traced, wrapper, raw, eager, rec
    x = o = None  # loop variables above that held the last input and output
    for k, spec in enumerate(input_specs):
        if generated(spec["init"], spec["dtype"][0], k) is not None:
            spec["tensor"] = spec["tensor"].to("meta")  # made again for the check: frees the device
    if args.device_kind == "cuda":
        torch.cuda.empty_cache()
    if args.refcheck:
        scratch = tempfile.mkdtemp(prefix="kb-verify-", dir=scratch_dir(args, 0))
        try:
            manifest = {"library": args.library, "arg": os.path.join(tmp_dir, "model.pt"), "device": args.device_kind,
                        "inputs": [], "outputs": []}
            check_args, slot_check = list(raw_values), []
            for k, s in enumerate(input_specs + slot_specs):
                entry = {"dtype": s["dtype"][1], "shape": list(s["tensor"].shape)}
                gen = generated(s["init"], s["dtype"][0], k)
                if gen is not None:
                    entry["generate"] = gen
                    value = refcheck_values(gen, list(s["tensor"].shape), s["tensor"].dtype, device)
                else:
                    if s["init"]["kind"] == "file":
                        entry["file"] = os.path.join(tmp_dir, s["init"]["path"])
                    else:
                        entry["file"] = os.path.join(scratch, "in%d.bin" % k)
                        write_raw(s["tensor"], entry["file"])
                    value = s["tensor"]
                manifest["inputs"].append(entry)
                if "slot" in s:
                    slot_check.append(value.to(device))
                else:
                    check_args[tensor_pos[k]] = value
            with torch.no_grad(), swapped(model, list(zip([n for n, _ in slots], slot_check))):
                expect = flat_outputs(model(*check_args))
            del check_args, slot_check
            low = any(s["dtype"][0] in ("float16", "bfloat16") for s in input_specs + slot_specs) or \
                any(o.dtype in (torch.float16, torch.bfloat16) for o in expect)
            manifest["atol"] = manifest["rtol"] = 1e-2 if low else (atol or 1e-4)
            for k, o in enumerate(expect):
                f = os.path.join(scratch, "out%d.bin" % k)
                stride = max(1, -(-o.numel() // SAMPLE))
                write_raw(o.reshape(-1)[::stride], f)
                manifest["outputs"].append({"file": f, "dtype": DTYPES[o.dtype][1], "shape": list(o.shape),
                                            "stride": stride})
            verify["compared"] = ["%d of %d" % (-(-o.numel() // m["stride"]), o.numel())
                                  for o, m in zip(expect, manifest["outputs"])]
            del expect
            if args.device_kind == "cuda":
                torch.cuda.empty_cache()
            mpath = os.path.join(scratch, "manifest.json")
            with open(mpath, "w") as f:
                json.dump(manifest, f)
            # Strict fp32 there too: NVIDIA's libraries read NVIDIA_TF32_OVERRIDE=0 (refcheck sets it as well).
            env = dict(os.environ, NVIDIA_TF32_OVERRIDE="0")
            p = subprocess.run([args.refcheck, mpath], capture_output=True, text=True, timeout=args.timeout, env=env)
            try:
                check = json.loads(p.stdout.strip().splitlines()[-1])
            except Exception:
                raise RuntimeError("kernelevo-refcheck gave no result (%s): %s" % (
                    "exit code %d" % p.returncode if p.returncode >= 0 else "signal %d" % -p.returncode,
                    one_line(p.stderr or p.stdout)))
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
        verify.update({"device": args.device_kind, "max_abs_diff": check.get("max_abs_diff"), "ok": check.get("ok", False)})
        phases.done("refcheck")
        if not check.get("ok"):
            shutil.rmtree(tmp_dir, ignore_errors=True)
            result.update({"status": "failed", "reason": "self-verification failed: " + one_line(check.get("error", "mismatch")),
                           "verify": verify, "seconds": time.time() - t0})
            return result
    shutil.rmtree(out_dir, ignore_errors=True)
    os.replace(tmp_dir, out_dir)
    # The task as JSON too: `kernelevo import kernelbench` writes the suite's task.json from it (after
    # checking it), never the file written here, in the problem's private folder.
    result.update({"status": "ok", "task": os.path.join(out_dir, "task.json"), "task_json": task, "verify": verify,
                   "inputs": len(input_specs), "parameters": len(slot_specs), "outputs": len(out_names), "notes": notes,
                   "tolerance": task["tolerance"], "flops": {"total": flops, "by_kind": flops_by_kind},
                   "phases": phases.seconds, "seconds": time.time() - t0})
    return result


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True, help="where OUT/NAME/ is written (kernelevo: the problem's private folder)")
    ap.add_argument("--reference-source", required=True, help="the suite's copy of jit_reference.cpp")
    ap.add_argument("--device", default="cpu", help="torch device to build and run the model on (cpu, cuda)")
    ap.add_argument("--refcheck", default="", help="kernelevo-refcheck executable (empty: skip the C++ check)")
    ap.add_argument("--library", default="", help="the built generic reference library")
    ap.add_argument("--max-numel", type=int, default=0)
    ap.add_argument("--timeout", type=float, default=900, help="seconds per problem")
    ap.add_argument("--scratch", default="")
    ap.add_argument("--precision", default=json.dumps(DEFAULT_PRECISION),
                    help="the tasks' precision policy as JSON: {task: its task.json form or null, policy, cudnn_tf32, matmul_tf32}")
    ap.add_argument("--regions", action="store_true",
                    help="import each problem as a whole model: a model folder of regions (kernelevo.export_model)")
    ap.add_argument("--kernelevo-python", default="", help="the folder holding the kernelevo Python package")
    ap.add_argument("files", nargs="+")
    args = ap.parse_args()
    args.precision = json.loads(args.precision)
    args.device_kind = "cuda" if args.device.startswith("cuda") else "cpu"
    if args.device_kind == "cuda" and not torch.cuda.is_available():
        print(json.dumps({"fatal": "this PyTorch (%s) sees no CUDA device, but the tool's LibTorch runs references on "
                                   "the GPU" % torch.__version__}), flush=True)
        return 2
    torch.set_grad_enabled(False)
    # Strict fp32: comparisons are judged against it (TF32 differs from fp32 by up to 3.4e-4 on a conv).
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False

    def on_alarm(signum, frame):
        raise Timeout()
    signal.signal(signal.SIGALRM, on_alarm)
    for path in args.files:
        t0 = time.time()
        signal.alarm(max(1, int(args.timeout)))
        try:
            # A problem that breaks at the shrunk sizes is tried again with equal sizes shrunk
            # together whatever their role, then with larger limits.
            tries = [(args.max_numel, False), (args.max_numel, True), (args.max_numel * 16, True), (args.max_numel * 256, True)]
            for attempt, (limit, joint) in enumerate(tries):
                try:
                    if args.regions:
                        res = import_model(path, args, limit, joint)
                    else:
                        res = import_one(path, args, args.reference_source, limit, joint)
                    break
                except ShrinkRefused:
                    if attempt == len(tries) - 1:
                        raise
        except Refused as e:
            res = {"source": os.path.abspath(path), "name": task_name(path), "status": "refused", "reason": str(e)}
        except Timeout:
            res = {"source": os.path.abspath(path), "name": task_name(path), "status": "failed",
                   "reason": "timed out after %d s (raise --timeout, the seconds allowed per problem%s; or shrink it with "
                             "--max-numel)" % (args.timeout, ": a whole model's regions are each traced, timed and "
                                               "checked" if args.regions else "")}
        except MemoryError:
            res = {"source": os.path.abspath(path), "name": task_name(path), "status": "failed", "reason": "out of memory"}
        except Exception as e:
            res = {"source": os.path.abspath(path), "name": task_name(path), "status": "failed",
                   "reason": "%s: %s" % (type(e).__name__, one_line(e)),
                   "trace": one_line(traceback.format_exc(), 2000)}
        finally:
            signal.alarm(0)
        res.setdefault("seconds", time.time() - t0)
        shutil.rmtree(os.path.join(args.out, res["name"] + ".tmp"), ignore_errors=True)
        if args.device_kind == "cuda":
            torch.cuda.empty_cache()
        print(json.dumps(res), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
