"""A traced model as a graph of ops, its partition into regions an expert would fuse, and a
pure-Python interpreter over it (export_model writes the regions as tasks, load_model runs the graph
with evolved regions substituted). The model folder's format is model_plan.md.

    g = ModelGraph.trace(model, (x,))       # torch.jit.trace, inlined; weights stay the live model's
    regions = g.partition(0.01)             # [Region]: anchors (gemm/conv/rnn/attention) + epilogues
    ys = g.run([x], replace={3: my_fn})     # region 3 computed by my_fn(list of its input tensors)
    m = region_module(g, regions[3])        # nn.Module: forward(*region.inputs) -> region.outputs
"""
import hashlib
import inspect
import os
import statistics
import time
import warnings

import torch
from torch import nn

from .kernelbench.common import identifier  # the importer's: letters, digits and _, unique in used
from .kernelbench.trace import RANDOM_OPS, conversions_watched
from .nodes import SCALAR_OPS, _is_tensor, _scope, out_of_place
from .partition import partition
from .torch_task import ExportError

_CALLS = {}


def _aten_call(kind, schema):
    """(callable, kwarg-only argument names by input position) for an aten op, cached by schema."""
    key = (kind, schema)
    if key not in _CALLS:
        try:
            parsed = torch._C.parse_schema(schema)
        except RuntimeError:
            parsed = None
        packet = getattr(torch.ops.aten, kind[len("aten::"):])
        if parsed is None:
            _CALLS[key] = (packet, [])
        else:
            _CALLS[key] = (getattr(packet, parsed.overload_name or "default", packet),
                           [a.name if a.kwarg_only else None for a in parsed.arguments])
    return _CALLS[key]


def exec_step(step, env):
    """Runs one step (kind, schema, input ids, output ids) of a program on env (value id -> value)."""
    kind, schema, ins, outs = step
    args = [env[u] for u in ins]
    if kind == "prim::ListConstruct":
        vals = [list(args)]
    elif kind == "prim::TupleConstruct":
        vals = [tuple(args)]
    elif kind in ("prim::ListUnpack", "prim::TupleUnpack"):
        vals = list(args[0])
    elif kind == "prim::NumToTensor":
        vals = [torch.tensor(args[0])]
    elif kind == "prim::device":
        vals = [args[0].device]
    elif kind == "prim::dtype":
        vals = [args[0].dtype]
    elif kind == "aten::__getitem__":
        vals = [args[0][args[1]]]
    elif kind in SCALAR_OPS:
        vals = [SCALAR_OPS[kind](args[0])]
    else:
        fn, kwnames = _aten_call(kind, schema)
        pos = [a for a, k in zip(args, kwnames + [None] * len(args)) if k is None]
        kw = {k: a for a, k in zip(args, kwnames) if k is not None}
        out = fn(*pos, **kw)
        vals = list(out) if len(outs) > 1 else [out]
    for u, v in zip(outs, vals):
        env[u] = v


class ModelGraph:
    """torch.jit.trace of a module, inlined; parameters resolved to the live module's tensors."""

    def __init__(self, model, traced, example_inputs):
        self.model, self.traced = model, traced
        self.graph = traced.inlined_graph
        self._examples = [_example_spec(x) for x in example_inputs]  # their specs, not the tensors
        self._read_graph()
        env = self._interpret(list(example_inputs))
        self._classify(env)  # then only the static values are kept: the example run's activations are GiBs
        self._static_values = {u: _clone(env[u]) for u in self.static if u in env}

    @classmethod
    def trace(cls, model, example_inputs):
        """Traces model (an nn.Module) on example_inputs (a tensor or a tuple of tensors) without
        autograd; raises ExportError when the graph cannot be interpreted or differs from eager."""
        if not isinstance(model, nn.Module):
            raise TypeError("model: an nn.Module, not %s" % type(model).__name__)
        examples = tuple(example_inputs) if isinstance(example_inputs, (tuple, list)) else (example_inputs,)
        for k, x in enumerate(examples):
            if not isinstance(x, torch.Tensor):
                raise TypeError("example_inputs[%d]: a tensor, not %s (export_model traces tensors only)" % (
                    k, type(x).__name__))
        state = {k: v.clone() for k, v in model.state_dict(keep_vars=False).items()}
        try:
            with torch.no_grad(), warnings.catch_warnings(), conversions_watched() as events:
                warnings.simplefilter("ignore", torch.jit.TracerWarning)
                with torch.random.fork_rng(devices=_cuda_devices(examples)):
                    try:
                        traced = torch.jit.trace(model, examples, check_trace=False)
                    except Exception as e:
                        raise ExportError("torch.jit.trace cannot trace the model: %s: %s" % (
                            type(e).__name__, " ".join(str(e).split())[:300])) from None
            _refuse_data_conversions(events)
            g = cls(model, traced, examples)
        finally:
            _restore(model, state)
        g.check(examples)
        return g

    def _read_graph(self):
        """nodes (compute nodes in order), constants, weights (value -> dotted name), model inputs."""
        ins = list(self.graph.inputs())
        self._self, self.input_values = ins[0].unique(), ins[1:]
        modules = {self._self: ""}
        self.nodes, self.constants, self.weight_of = [], {}, {}
        self.steps = []  # per node: (kind, schema, input value ids, output value ids)
        for node in self.graph.nodes():
            kind = node.kind()
            if list(node.blocks()):
                raise ExportError("the traced graph has control flow (%s): it cannot be partitioned" % kind)
            if kind == "prim::GetAttr":
                owner = modules.get(node.input().unique())
                if owner is None:
                    raise ExportError("attribute %s of a non-module value in the traced graph" % node.s("name"))
                path = owner + ("." if owner else "") + node.s("name")
                if _is_tensor(node.output()):
                    self.weight_of[node.output().unique()] = path
                else:
                    modules[node.output().unique()] = path
            elif kind == "prim::Constant":
                try:
                    self.constants[node.output().unique()] = node.output().toIValue()
                except Exception:
                    self.constants[node.output().unique()] = None
            elif kind.startswith("aten::") or kind in _PRIM_OPS:
                self.nodes.append(node)
                self.steps.append((kind, node.schema() if kind.startswith("aten::") else "",
                                   tuple(v.unique() for v in node.inputs()), tuple(o.unique() for o in node.outputs())))
            else:
                raise ExportError("the traced graph has an op the interpreter does not run: %s" % kind)
        self.output_values = _flat_outputs(self.graph)
        self.value_of = {v.unique(): v for n in self.nodes for v in list(n.inputs()) + list(n.outputs())}
        self.value_of.update({v.unique(): v for v in self.input_values})
        self._def = {o.unique(): i for i, n in enumerate(self.nodes) for o in n.outputs()}
        self._uses = {}
        for i, n in enumerate(self.nodes):
            for v in n.inputs():
                self._uses.setdefault(v.unique(), []).append(i)
        keep = set(self.weight_of) | set(self.constants) | {v.unique() for v in self.output_values}
        self._dies_at = [[] for _ in self.nodes]
        for u, uses in self._uses.items():
            if u not in keep:
                self._dies_at[max(uses)].append(u)
        self.regions = []

    def _params(self):
        """{dotted name: the live model's tensor} for the weights the graph reads, looked up on each
        call (attribute by attribute: a weight tied under two names is found under both)."""
        live = {}
        for name in set(self.weight_of.values()):
            obj = self.model
            for part in name.split("."):
                obj = getattr(obj, part)
            live[name] = obj
        return live

    def _base_env(self, inputs):
        env = dict(self.constants)
        live = self._params()
        for uid, name in self.weight_of.items():
            env[uid] = live[name]
        if len(inputs) != len(self.input_values):
            raise ValueError("inputs: %d tensor(s) expected, got %d" % (len(self.input_values), len(inputs)))
        for v, x in zip(self.input_values, inputs):
            env[v.unique()] = x
        return env

    def _exec_range(self, env, indices):
        for i in indices:
            exec_step(self.steps[i], env)

    def _interpret(self, inputs):
        env = self._base_env(list(inputs))
        with torch.no_grad():
            for i in range(len(self.nodes)):
                try:
                    exec_step(self.steps[i], env)
                except Exception as e:
                    raise ExportError("the interpreter cannot run node %d (%s, in %s): %s: %s" % (
                        i, self.steps[i][0], _scope(self.nodes[i]) or "the model's forward", type(e).__name__,
                        " ".join(str(e).split())[:300])) from None
        return env

    def _outputs(self, env):
        return [env[v.unique()] for v in self.output_values]

    def run(self, inputs, replace=None):
        """The model's outputs (a list of tensors) on inputs, computed node by node with the live
        model's weights; replace = {region_index: fn(list of region input tensors) -> list of its
        output tensors} computes those regions (of the last partition()) instead. Values are
        dropped after their last use (the memory of an eager forward, not of every intermediate)."""
        replace = replace or {}
        bad = [k for k in replace if not isinstance(k, int) or not 0 <= k < len(self.regions)]
        if bad:
            raise ValueError("replace: region index %r is not one of the %d regions of partition()" % (
                bad[0], len(self.regions)))
        env = self._base_env(list(inputs))
        by_start = {self.regions[k].start: k for k in replace}
        with torch.no_grad():
            i = 0
            while i < len(self.nodes):
                k = by_start.get(i)
                if k is None:
                    self._exec_range(env, [i])
                    end = i + 1
                else:
                    self._run_replaced(env, self.regions[k], replace[k])
                    end = self.regions[k].end
                for j in range(i, end):
                    for u in self._dies_at[j]:
                        env.pop(u, None)
                i = end
        return self._outputs(env)

    def _run_replaced(self, env, r, fn):
        outs = fn([env[v.unique()] for v in r.inputs])
        outs = [outs] if isinstance(outs, torch.Tensor) else list(outs)
        if len(outs) != len(r.outputs):
            raise ValueError("region %s: %d output(s) expected, the replacement gave %d" % (
                r.name, len(r.outputs), len(outs)))
        for v, x in zip(r.outputs, outs):
            env[v.unique()] = x
        for uid in self._static_defined(r):
            env[uid] = self._static_values[uid]
        # weight-derived values the region computed and later nodes read (e.g. a slice of a mask buffer)
        self._exec_range(env, [j for j in range(r.start, r.end)
                               if all(u in self.free and u not in self.static for u in self.steps[j][3])])

    def check(self, examples):
        """The interpreter against eager on the examples and on a second draw of inputs like them (a
        trace that depends on input values, e.g. data-dependent control flow, differs there)."""
        second = tuple(_like(x) for x in examples)
        for xs in (examples, second):
            state = {k: v.clone() for k, v in self.model.state_dict().items()}
            try:
                with torch.no_grad(), torch.random.fork_rng(devices=_cuda_devices(xs)):
                    torch.manual_seed(1234)
                    eager = _flatten(self.model(*xs))
                    torch.manual_seed(1234)
                    mine = self.run(list(xs))
            finally:
                _restore(self.model, state)
            if len(eager) != len(mine) or any(not _close(a, b) for a, b in zip(eager, mine)):
                raise ExportError("the traced graph does not reproduce the model's output%s: its forward depends "
                                  "on input values (data-dependent control flow) or on ops the trace cannot see" % (
                                      "" if xs is examples else " on other inputs of the same shapes"))

    def _classify(self, env):
        """static: shape-derived values (not tensors, or 0-dim tensors computed from those), fixed by
        the trace (their values in env, the example run); free: values that do not depend on the model
        inputs (weights and what is computed from them), recomputed by a region that uses them."""
        self.static, self.free = set(), set(self.weight_of) | set(self.constants)
        for uid, v in self.constants.items():
            if not isinstance(v, torch.Tensor) or v.numel() <= 1:
                self.static.add(uid)
        for node in self.nodes:
            if node.kind() in RANDOM_OPS:  # new values on every call, whatever its inputs: an activation
                continue
            ins = [v.unique() for v in node.inputs()]
            tensor_ins = [u for u, v in zip(ins, node.inputs()) if _is_tensor(v) and u not in self.static]
            for o in node.outputs():
                val = env.get(o.unique())
                if (not _is_tensor(o) and not _flatten(val)) or node.kind() == "prim::NumToTensor" or \
                        (not tensor_ins and isinstance(val, torch.Tensor) and val.numel() <= 1):
                    self.static.add(o.unique())
                if all(u in self.free or u in self.static for u in ins):
                    self.free.add(o.unique())

    def _static_defined(self, region):
        return [o.unique() for i in range(region.start, region.end) for o in self.nodes[i].outputs()
                if o.unique() in self.static]

    def fingerprint(self):
        """sha256 hex of the op kinds in order, the parameter names/shapes/dtypes and the input shapes/dtypes."""
        h = hashlib.sha256()
        for n in self.nodes:
            h.update(n.kind().encode() + b"\n")
        live = self._params()
        for name in sorted(set(self.weight_of.values())):
            t = live[name]
            h.update(("%s %s %s\n" % (name, list(t.shape), t.dtype)).encode())
        for s in self.input_specs():
            h.update(("input %s %s\n" % (s["shape"], s["dtype"])).encode())
        return h.hexdigest()

    def input_specs(self):
        """[{"name", "dtype", "shape"(, "low", "high")}] of the model inputs (names from forward's parameters)."""
        try:
            names = [p for p in inspect.signature(self.model.forward).parameters]
        except (TypeError, ValueError):
            names = []
        return [dict(name=names[k] if k < len(names) else "input%d" % k, **spec)
                for k, spec in enumerate(self._examples)]

    def partition(self, threshold=0.0):
        """The regions (also kept as self.regions, which run(replace=...) indexes); statuses "task",
        "view" or "refused" (threshold is applied by export_model once the regions are timed)."""
        self.regions = partition(self)
        return self.regions

    def profile(self, regions, inputs, reps=20):
        """Milliseconds per region: the median of reps runs of its nodes after warm-up, synchronised
        with CUDA events on a GPU, perf_counter on the CPU. The model's buffers are restored after
        (BatchNorm in training mode updates them on every run)."""
        state = {k: v.clone() for k, v in self.model.state_dict().items()}
        try:
            return self._profile(regions, inputs, reps)
        finally:
            _restore(self.model, state)

    def _profile(self, regions, inputs, reps):
        env = self._interpret(list(inputs))
        cuda = any(isinstance(x, torch.Tensor) and x.is_cuda for x in inputs)
        times = []
        with torch.no_grad():
            for r in regions:
                idx = list(range(r.start, r.end))
                local = dict(env)
                for _ in range(3):
                    self._exec_range(local, idx)
                samples = []
                for _ in range(max(1, reps)):
                    if cuda:
                        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                        a.record()
                        self._exec_range(local, idx)
                        b.record()
                        b.synchronize()
                        samples.append(a.elapsed_time(b))
                    else:
                        t0 = time.perf_counter()
                        self._exec_range(local, idx)
                        samples.append((time.perf_counter() - t0) * 1e3)
                times.append(statistics.median(samples))
        return times

    def capture(self, regions, inputs):
        """(inputs, outputs): per region, clones of its input and of its output tensors on inputs, from
        one run of the interpreter (clones: a later in-place op does not change them); the model's
        buffers are restored after."""
        state = {k: v.clone() for k, v in self.model.state_dict().items()}
        try:
            return self._capture(regions, inputs)
        finally:
            _restore(self.model, state)

    def _capture(self, regions, inputs):
        env = self._base_env(list(inputs))
        ins, outs = [None] * len(regions), [None] * len(regions)
        starts, ends = {}, {}
        for k, r in enumerate(regions):
            starts.setdefault(r.start, []).append(k)
            ends.setdefault(r.end, []).append(k)
        with torch.no_grad():
            for i in range(len(self.nodes) + 1):
                for k in ends.get(i, []):
                    outs[k] = [_clone(env[v.unique()]) for v in regions[k].outputs]
                for k in starts.get(i, []):
                    ins[k] = [_clone(env[v.unique()]) for v in regions[k].inputs]
                if i < len(self.nodes):
                    self._exec_range(env, [i])
        return ins, outs


_PRIM_OPS = {"prim::ListConstruct", "prim::TupleConstruct", "prim::ListUnpack", "prim::TupleUnpack",
             "prim::NumToTensor", "prim::device", "prim::dtype"}


def _example_spec(x):
    """An example input's {"dtype", "shape"} (what the graph keeps of it after the trace), and for
    integer inputs (token ids, indices) their range [low, high): the examples' min and max + 1."""
    spec = {"dtype": str(x.dtype).replace("torch.", ""), "shape": list(x.shape)}
    if x.numel() and x.dtype != torch.bool and not x.is_floating_point() and not x.is_complex():
        spec["low"], spec["high"] = int(x.min()), int(x.max()) + 1
    return spec


def _clone(x):
    return x.clone() if isinstance(x, torch.Tensor) else x


def _flat_outputs(graph):
    """The graph's output values, tuples and lists (TupleConstruct/ListConstruct) flattened as eager
    outputs are (_flatten)."""
    outs, todo = [], list(graph.outputs())
    while todo:
        v = todo.pop(0)
        n = v.node()
        if n.kind() in ("prim::TupleConstruct", "prim::ListConstruct") and not _is_tensor(v):
            todo[:0] = list(n.inputs())
        else:
            outs.append(v)
    return outs


def _flatten(y):
    if isinstance(y, torch.Tensor):
        return [y]
    if isinstance(y, (list, tuple)):
        return [t for x in y for t in _flatten(x)]
    return []


def _close(a, b):
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    if not a.is_floating_point():
        return bool(torch.equal(a, b))
    return bool(torch.allclose(a, b, rtol=1e-6, atol=1e-6, equal_nan=True))


def _like(x):
    if x.is_floating_point():
        lo, hi = (float(x.min()), float(x.max())) if x.numel() else (0.0, 1.0)
        if lo >= 0 and hi <= 1:
            return torch.rand_like(x)
        return torch.randn_like(x) * float(x.std() if x.numel() > 1 else 1) + float(x.mean())
    if x.dtype == torch.bool:
        return torch.randint_like(x, 0, 2).bool()
    return x.clone()  # integer inputs (indices, lengths) keep their values


def _refuse_data_conversions(events):
    """A tensor's values turned into a Python value in the model's code (not torch's own): the trace
    fixed one path or one value, so it is not the model."""
    torch_dir = os.path.dirname(os.path.abspath(torch.__file__)) + os.sep
    for e in events:
        if not e["shape"] and not os.path.abspath(e["file"]).startswith(torch_dir):
            raise ExportError("data-dependent control flow at %s:%d (the trace would fix one path): a tensor's values "
                              "turned into a Python value (%s)" % (os.path.basename(e["file"]), e["line"], e["method"]))


def _cuda_devices(xs):
    return sorted({x.device.index or 0 for x in xs if isinstance(x, torch.Tensor) and x.is_cuda})


def _restore(model, state):
    """Buffers as they were (BatchNorm in training mode updates its running statistics)."""
    with torch.no_grad():
        for k, v in model.state_dict().items():
            if k in state:
                v.copy_(state[k])


class RegionModule(nn.Module):
    """One region as a module: forward(*region inputs) runs exactly its nodes (and the weight-derived
    nodes before it that it uses), with the weights as its own parameters/buffers. It holds plain
    values only (no graph), so that it can be deep-copied and traced."""

    def __init__(self, graph, region):
        super().__init__()
        live = graph._params()
        self._weights = {}  # value id -> attribute
        for name in region.weights:
            attr = name.replace(".", "_")
            t = live[name].detach().clone()
            if isinstance(live[name], nn.Parameter):
                self.register_parameter(attr, nn.Parameter(t, requires_grad=False))
            else:
                self.register_buffer(attr, t)
        for uid, name in graph.weight_of.items():
            if name in region.weights:
                self._weights[uid] = name.replace(".", "_")
        steps = [out_of_place(graph.steps[i]) if i in region.functional else graph.steps[i]
                 for i in list(region.pulled) + list(range(region.start, region.end))]
        self._steps = [s for s in steps if not all(u in graph.static for u in s[3])]
        used = {u for s in self._steps for u in s[2]}
        self._fixed = {u: v for u, v in graph.constants.items() if u in used}
        self._fixed.update({u: graph._static_values[u] for u in graph.static if u in used})
        self._inputs = [v.unique() for v in region.inputs]
        self._outputs = [v.unique() for v in region.outputs]

    def forward(self, *inputs):
        env = dict(self._fixed)
        for uid, attr in self._weights.items():
            env[uid] = getattr(self, attr)
        env.update(zip(self._inputs, inputs))
        for step in self._steps:
            exec_step(step, env)
        outs = [env[u] for u in self._outputs]
        return outs[0] if len(outs) == 1 else tuple(outs)


def input_names(region):
    """Names for the region's inputs: the traced values' names ("q", "input_2"), else the producing
    module's path ("attn_c_attn_out"), else x0, x1, ..."""
    used, names = set(), []
    for k, v in enumerate(region.inputs):
        base = v.debugName().split(".")[0]
        if not base or base[0].isdigit():
            scope = _scope(v.node()) if v.node().kind() != "prim::Param" else ""
            base = scope.replace(".", "_") + "_out" if scope else "x%d" % k
        names.append(identifier(base, used))
    return names


def region_module(graph, region):
    """An nn.Module whose forward(*region.inputs) returns the region's outputs (a tensor or a tuple);
    its forward's signature names the inputs (input_names), which the task's inputs are named after."""
    def forward(self, *inputs):
        return RegionModule.forward(self, *inputs)

    P = inspect.Parameter
    forward.__signature__ = inspect.Signature([P("self", P.POSITIONAL_OR_KEYWORD)] + [
        P(n, P.POSITIONAL_OR_KEYWORD) for n in input_names(region)])
    cls = type("Region_" + (region.task_name or "module"), (RegionModule,), {"forward": forward})
    return cls(graph, region)
