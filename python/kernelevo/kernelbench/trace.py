"""The functional wrapper that gets traced (inputs, then parameters and buffers), the checks of the
traced graph (randomness, training mode, values the trace may have fixed), the tensors turned into
Python values while tracing, and the comparisons of outputs."""
import contextlib
import math
import os
import traceback

import torch
from torch import nn

from .common import Refused, one_line

# Ops that draw random numbers: a forward using them cannot be checked against a fixed reference.
RANDOM_OPS = {
    "aten::rand", "aten::randn", "aten::randint", "aten::rand_like", "aten::randn_like", "aten::randint_like",
    "aten::bernoulli", "aten::bernoulli_", "aten::normal", "aten::normal_", "aten::uniform_", "aten::multinomial",
    "aten::randperm", "aten::exponential_", "aten::geometric_", "aten::cauchy_", "aten::log_normal_",
    "aten::native_dropout", "aten::rrelu", "aten::rrelu_with_noise", "aten::poisson",
}
DROPOUT_OPS = {"aten::dropout", "aten::feature_dropout", "aten::alpha_dropout", "aten::feature_alpha_dropout",
               "aten::dropout_", "aten::feature_dropout_", "aten::alpha_dropout_", "aten::feature_alpha_dropout_"}


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
