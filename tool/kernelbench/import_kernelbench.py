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
  - writes the parameters and buffers as raw tensor files (init kind "file"), and task.json;
  - verifies itself: the traced graph against the eager model on a second draw of inputs, then the
    C++ generic reference (kernelevo-refcheck on the built reference library) against the eager
    outputs on the recorded inputs.
Refusals (data-dependent control flow, randomness in forward, BatchNorm in training mode,
unsupported dtypes, ...) get a one-line reason and the batch goes on.

Prints one JSON object per problem on stdout.
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
    """Wraps torch's generators while get_inputs() runs and remembers which tensor came from which."""

    def __init__(self):
        self.made = {}  # id(tensor) -> (tensor, init)

    def _wrap(self, name, init_of):
        orig = getattr(torch, name)

        def fn(*args, **kwargs):
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
# Sizes tied to the model's structure (divisibility by groups, bias and norm shapes): shrunk last.
STRUCTURAL = re.compile(r"channel|feature|hidden|embed|_shape$|_size$|^C$|^num_", re.I)


def input_numel(mod):
    """Elements of get_inputs() without allocating them (meta tensors)."""
    return sum(x.numel() for x in _meta_inputs(mod))


def shrink(mod, max_numel):
    """Halves the module's size constants until the inputs hold <= max_numel elements: the largest
    size value first, everywhere it appears (integers and tuples of integers), so sizes that were
    equal stay equal. Returns {name: (old, new)}."""
    changed = {}

    def candidates():
        for k, v in vars(mod).items():
            if k.startswith("_") or NOT_A_SIZE.search(k) or (STRUCTURAL.search(k) and not structural):
                continue
            if isinstance(v, int) and not isinstance(v, bool):
                yield k, v, [v]
            elif isinstance(v, (tuple, list)) and v and all(isinstance(e, int) and not isinstance(e, bool) for e in v):
                yield k, v, list(v)

    structural = False  # batch, spatial and sequence sizes first; then channels and features too
    for _ in range(400):
        try:
            if input_numel(mod) <= max_numel:
                break
        except Exception:
            pass  # meta tensors unsupported by this get_inputs(): shrink until nothing is left to shrink
        values = [e for _, _, elems in candidates() for e in elems if e >= 16]
        if not values and not structural:
            structural = True
            continue
        if not values:
            break
        big = max(values)
        for k, v, elems in list(candidates()):
            if big not in elems:
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


def fingerprint(t):
    return float(t.detach().double().sum()) if t.numel() else 0.0


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


def import_one(path, args, reference_source, max_numel):
    src, mod = load_problem(path)
    shrunk = {}
    if max_numel > 0:
        shrunk = shrink(mod, max_numel)
    try:
        nbytes = sum(x.numel() * x.element_size() for x in _meta_inputs(mod))
    except Exception:
        nbytes = 0
    with big_problem_turn(args, nbytes):
        return _import_one(path, args, reference_source, src, mod, shrunk)


def _meta_inputs(mod):
    saved = {}
    for name in ("rand", "randn", "randint", "ones", "zeros", "empty", "full"):
        orig = getattr(torch, name)
        saved[name] = orig

        def meta(*a, __orig=orig, **k):
            k["device"] = "meta"
            return __orig(*a, **k)
        setattr(torch, name, meta)
    try:
        return [x for x in mod.get_inputs() if isinstance(x, torch.Tensor)]
    finally:
        for name, orig in saved.items():
            setattr(torch, name, orig)


def _import_one(path, args, reference_source, src, mod, changed):
    t0 = time.time()
    name = task_name(path)
    result = {"source": os.path.abspath(path), "name": name}
    notes = []
    shrunk_note = ""
    if changed:
        result["shrunk"] = {k: v[1] for k, v in changed.items()}
        shrunk_note = " (with sizes shrunk by --max-numel: %s)" % ", ".join("%s=%s" % (k, v[1]) for k, v in changed.items())
        notes.append("sizes shrunk for this machine: " + ", ".join("%s %s->%s" % (k, a, b) for k, (a, b) in changed.items()))
    device = torch.device(args.device)

    # The model, exactly as KernelBench builds it.
    try:
        torch.manual_seed(42)
        init = mod.get_init_inputs()
        torch.manual_seed(42)
        model = mod.Model(*init)
    except Exception as e:
        raise (ShrinkRefused if shrunk_note else Refused)("constructing the model failed%s: %s: %s" % (shrunk_note, type(e).__name__, one_line(e)))
    if not isinstance(model, nn.Module):
        raise Refused("Model(...) is not an nn.Module")
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

    def draw(seed):
        rec = Recorder()
        torch.manual_seed(seed)
        with rec.active():
            try:
                raw = list(mod.get_inputs())
            except Exception as e:
                raise (ShrinkRefused if shrunk_note else Refused)("get_inputs() failed%s: %s: %s" % (shrunk_note, type(e).__name__, one_line(e)))
        return raw, rec

    raw, rec = draw(42)
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

    # Trace the functional wrapper: inputs, then parameters and buffers.
    wrapper = Functional(model, call_args, tensor_pos, [n for n, _ in slots])
    with torch.no_grad(), warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            traced = torch.jit.trace(wrapper, tuple(dev_inputs + slot_values), check_trace=False)
        except Exception as e:
            raise Refused("tracing failed: %s: %s" % (type(e).__name__, one_line(e)))
    for w in caught:
        # A tensor turned into a Python value in the problem's own code: a branch or a size taken
        # from the data. (PyTorch's own shape checks warn too; those depend on shapes only.)
        msg = str(w.message)
        if issubclass(w.category, torch.jit.TracerWarning) and "Converting a tensor to a Python" in msg and \
                os.path.abspath(w.filename) == os.path.abspath(path):
            raise Refused("data-dependent control flow at line %d (the trace would fix one path): %s" % (
                w.lineno, one_line(msg, 120)))
    check_graph(traced.graph)
    with torch.no_grad():
        again = flat_outputs(traced(*dev_inputs, *slot_values))
    if len(again) != len(eager) or not all(close(a, b, 0, 0) or close(a, b, 1e-5, 1e-5) for a, b in zip(again, eager)):
        raise Refused("the traced graph does not reproduce the model on the recorded inputs")
    # A second draw of inputs: a trace that baked in value-dependent decisions shows here.
    raw2, _ = draw(43)
    call2 = [x.to(device) if isinstance(x, torch.Tensor) else x for x in raw2]
    with torch.no_grad():
        eager2 = flat_outputs(model(*call2))
        traced2 = flat_outputs(traced(*[call2[i] for i in tensor_pos], *slot_values))
    trace_diff = max([max_abs_diff(a, b) for a, b in zip(traced2, eager2)] + [0.0])
    if len(traced2) != len(eager2) or not all(close(a, b, 1e-5, 1e-5) for a, b in zip(traced2, eager2)):
        raise Refused("the traced graph depends on the input values (data-dependent control flow): max |diff| %g on "
                      "other inputs" % trace_diff)
    del raw2, call2, eager2, traced2, again

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
    dim_names = dims_with_names(shapes, mod)

    def shape_json(shape):
        return [dim_names.get(s, s) for s in shape]

    task = {
        "name": name,
        "description": "KernelBench problem %s, imported by kernelevo import kernelbench (torch %s)%s" % (
            os.path.basename(path), torch.__version__, "; " + "; ".join(notes) if notes else ""),
        "reference": {"source": os.path.relpath(reference_source, out_dir), "function": "kevo_kb::forward",
                      "signature": "vector", "setup": "kevo_kb::setup", "arg": "model.pt"},
        "inputs": [{"name": s["name"], "dtype": s["dtype"][0], "shape": shape_json(s["tensor"].shape), "init": s["init"]}
                   for s in input_specs + slot_specs],
        "outputs": [{"name": n, "dtype": DTYPES[o.dtype][0], "shape": shape_json(o.shape)} for n, o in zip(out_names, eager)],
    }
    if dim_names:
        task["shapes"] = [{v: k for k, v in sorted(dim_names.items())}]
    with open(os.path.join(tmp_dir, "task.json"), "w") as f:
        json.dump(task, f, indent=2)
        f.write("\n")
    with open(os.path.join(tmp_dir, "problem.py"), "w", encoding="utf-8") as f:
        f.write(src)

    # Self-verification: the C++ reference on the recorded inputs against the eager outputs. The
    # device copies go first: the check runs in its own process and needs the GPU's memory.
    verify = {"trace_max_abs_diff_other_inputs": trace_diff}
    eager = [o.cpu() for o in eager]
    del call_args, dev_inputs, slot_values, traced
    if args.device_kind == "cuda":
        torch.cuda.empty_cache()
    if args.refcheck:
        nbytes = sum(s["tensor"].numel() * s["tensor"].element_size() for s in input_specs if s["init"]["kind"] != "file")
        nbytes += sum(o.numel() * o.element_size() for o in eager)
        scratch = tempfile.mkdtemp(prefix="kb-verify-", dir=scratch_dir(args, nbytes))
        try:
            manifest = {"library": args.library, "arg": os.path.join(tmp_dir, "model.pt"), "device": args.device_kind,
                        "inputs": [], "outputs": []}
            for k, s in enumerate(input_specs + slot_specs):
                if s["init"]["kind"] == "file":
                    f = os.path.join(tmp_dir, s["init"]["path"])
                else:
                    f = os.path.join(scratch, "in%d.bin" % k)
                    write_raw(s["tensor"], f)
                manifest["inputs"].append({"file": f, "dtype": s["dtype"][1], "shape": list(s["tensor"].shape)})
            low = any(s["dtype"][0] in ("float16", "bfloat16") for s in input_specs + slot_specs) or \
                any(o.dtype in (torch.float16, torch.bfloat16) for o in eager)
            manifest["atol"] = manifest["rtol"] = 1e-2 if low else 1e-4
            for k, o in enumerate(eager):
                f = os.path.join(scratch, "out%d.bin" % k)
                write_raw(o, f)
                manifest["outputs"].append({"file": f, "dtype": DTYPES[o.dtype][1], "shape": list(o.shape)})
            mpath = os.path.join(scratch, "manifest.json")
            with open(mpath, "w") as f:
                json.dump(manifest, f)
            p = subprocess.run([args.refcheck, mpath], capture_output=True, text=True, timeout=args.timeout)
            try:
                check = json.loads(p.stdout.strip().splitlines()[-1])
            except Exception:
                raise RuntimeError("kernelevo-refcheck gave no result (%s): %s" % (
                    "exit code %d" % p.returncode if p.returncode >= 0 else "signal %d" % -p.returncode,
                    one_line(p.stderr or p.stdout)))
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
        verify.update({"device": args.device_kind, "max_abs_diff": check.get("max_abs_diff"), "ok": check.get("ok", False)})
        if not check.get("ok"):
            shutil.rmtree(tmp_dir, ignore_errors=True)
            result.update({"status": "failed", "reason": "self-verification failed: " + one_line(check.get("error", "mismatch")),
                           "verify": verify, "seconds": time.time() - t0})
            return result
    shutil.rmtree(out_dir, ignore_errors=True)
    os.replace(tmp_dir, out_dir)
    result.update({"status": "ok", "task": os.path.join(out_dir, "task.json"), "verify": verify,
                   "inputs": len(input_specs), "parameters": len(slot_specs), "outputs": len(eager), "notes": notes,
                   "seconds": time.time() - t0})
    return result


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--reference-source", required=True, help="the suite's copy of jit_reference.cpp")
    ap.add_argument("--device", default="cpu", help="torch device to build and run the model on (cpu, cuda)")
    ap.add_argument("--refcheck", default="", help="kernelevo-refcheck executable (empty: skip the C++ check)")
    ap.add_argument("--library", default="", help="the built generic reference library")
    ap.add_argument("--max-numel", type=int, default=0)
    ap.add_argument("--timeout", type=float, default=900, help="seconds per problem")
    ap.add_argument("--scratch", default="")
    ap.add_argument("files", nargs="+")
    args = ap.parse_args()
    args.device_kind = "cuda" if args.device.startswith("cuda") else "cpu"
    if args.device_kind == "cuda" and not torch.cuda.is_available():
        print(json.dumps({"fatal": "this PyTorch (%s) sees no CUDA device, but the tool's LibTorch runs references on "
                                   "the GPU" % torch.__version__}), flush=True)
        return 2
    torch.set_grad_enabled(False)

    def on_alarm(signum, frame):
        raise Timeout()
    signal.signal(signal.SIGALRM, on_alarm)
    for path in args.files:
        t0 = time.time()
        signal.alarm(max(1, int(args.timeout)))
        try:
            # A problem that breaks at the shrunk sizes gets two more tries with larger ones.
            limit = args.max_numel
            for attempt in range(3):
                try:
                    res = import_one(path, args, args.reference_source, limit)
                    break
                except ShrinkRefused:
                    if attempt == 2:
                        raise
                    limit *= 16
        except Refused as e:
            res = {"source": os.path.abspath(path), "name": task_name(path), "status": "refused", "reason": str(e)}
        except Timeout:
            res = {"source": os.path.abspath(path), "name": task_name(path), "status": "failed",
                   "reason": "timed out after %d s (try --max-numel, or a larger --timeout)" % args.timeout}
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
