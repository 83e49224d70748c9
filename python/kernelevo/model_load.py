"""load_model(): a model folder (export_model's plan.json, its region tasks and their cached kernels,
python/kernelevo/model_plan.md) applied to the user's live module: each region whose kernel is usable
runs as its operator torch.ops.kernelevo.NAME with the live model's weights, every other region stays in
PyTorch with the reason, and an end-to-end check on fresh inputs falls back region by region."""
import inspect
import math
import os
import re
import warnings

import torch
from torch import nn

from .graph import ModelGraph, region_module
from .model_folder import (_flat, _pct, _plan_reason, model_device, needed_tolerance, plan_inputs,  # noqa: F401 (model_load's API too)
                           read_plan)
from .op import _torch_dtype, load_op
from .files import FileRefused, load_json_file

CHECK_SEED = 20240607  # the check's inputs: a generator of its own (not the export's draw, not the user's RNG)
_FP32_DEFAULT_TOL = 1e-4  # task.json without a tolerance (tool/task/task.cpp's default for fp32)


def _tolerance_of(task):
    """A task's tolerance as one number for the judge's rule at atol = rtol (the importer writes them
    equal): the larger of its atol and rtol."""
    tol = task.get("tolerance", {})
    if isinstance(tol, (int, float)):
        return float(tol)
    return max(float(tol.get("atol", _FP32_DEFAULT_TOL)), float(tol.get("rtol", _FP32_DEFAULT_TOL)))


class _Live:
    """A parameter or buffer of the live model by its dotted name, looked up at each call (a weight
    the user replaces later is the one used)."""

    def __init__(self, model, name):
        self.path = name.split(".")
        self.model = model

    def __call__(self):
        obj = self.model
        for part in self.path:
            obj = getattr(obj, part)
        return obj


class LoadedRegion:
    """One region of the plan as loaded: status "kernel" (its operator runs) or "pytorch" (reason)."""

    def __init__(self, spec, index, status, reason, op=None, weights=(), tolerance=None):
        self.name, self.kind, self.share = spec["name"], spec.get("kind", ""), spec.get("share")
        self.plan_status, self.task = spec.get("status", ""), spec.get("task")
        self.index, self.status, self.reason = index, status, reason
        self.op, self.weights, self.tolerance = op, list(weights), tolerance
        self.check_t = None  # the region's own error in the check (tolerance units), where measured

    def disable(self, reason):
        self.status, self.reason = "pytorch", reason

    def call(self, inputs):
        """The region on its input activations with the live model's weights: a list of its outputs."""
        outs = self.op.call(list(inputs), [w() for w in self.weights])
        return list(outs) if isinstance(outs, (tuple, list)) else [outs]

    @property
    def traceable(self):
        """Its call is one dispatcher operator (torch.jit.trace records it), not a Python-side kernel call."""
        return bool(getattr(self.op, "_through_op", False))


def _load_region(spec, index, out_dir, model, live, cache_dir, arch, kernelevo, verbose, min_speedup):
    """A "task" region's operator, when its cached kernel is usable, measured at least `min_speedup` over
    its reference when validated, and its weights are the live model's."""
    task_dir = os.path.join(out_dir, spec["task"])
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # load_op's fallback warning: the reason goes into report()
            op = load_op(task_dir, cache_dir=cache_dir, arch=arch, kernelevo=kernelevo, verbose=verbose)
    except Exception as e:
        return LoadedRegion(spec, index, "pytorch", "load_op failed: %s: %s" % (type(e).__name__, " ".join(str(e).split())[:300]))
    if op.kernel is None:
        return LoadedRegion(spec, index, "pytorch", op.reason or "no usable kernel")
    speedup = op.speedup
    if speedup is not None and speedup < min_speedup:
        return LoadedRegion(spec, index, "pytorch", "its kernel measured %.3gx over the LibTorch reference when validated, "
                            "below min_speedup=%g: slower, stays in PyTorch (load_model(..., min_speedup=0) runs it)" % (
                                speedup, min_speedup))
    names, why = _task_weight_order(spec, op, model, live)
    if why:
        return LoadedRegion(spec, index, "pytorch", why)
    return LoadedRegion(spec, index, "kernel", "kernel %s" % op.kernel, op=op,
                        weights=[_Live(model, n) for n in names], tolerance=_tolerance_of(op.task))


def _repeat_region(spec, index, first, first_spec, model, live):
    """A region the plan marks as a repeat of an earlier one (`first`): that region's operator, on its own
    activations and its own weights (in the order of first's, each of the same shape and dtype), where
    `first` runs as a kernel. The check then judges it on its own (run_check)."""
    if first is None or first_spec is None:
        return LoadedRegion(spec, index, "pytorch", "a repeat of region %s, which is not a region before it in the "
                                                    "plan" % spec["same_as"])
    if first.status != "kernel":
        return LoadedRegion(spec, index, "pytorch", "a repeat of region %s, which runs in PyTorch (%s)" % (
            spec["same_as"], first.reason))
    names, theirs = _slot_order(spec, model), _slot_order(first_spec, model)
    if len(names) != len(theirs) or any(n not in live for n in names):
        return LoadedRegion(spec, index, "pytorch", "its weights %s are not of the kind of region %s's" % (names, first.name))
    for n, m in zip(names, theirs):
        if list(live[n].shape) != list(live[m].shape) or live[n].dtype != live[m].dtype:
            return LoadedRegion(spec, index, "pytorch", "%s: %s%s, region %s's %s: %s%s" % (
                n, str(live[n].dtype).replace("torch.", ""), list(live[n].shape), first.name, m,
                str(live[m].dtype).replace("torch.", ""), list(live[m].shape)))
    return LoadedRegion(spec, index, "kernel", "kernel %s (region %s's, repeated)" % (first.op.kernel, first.name),
                        op=first.op, weights=[_Live(model, n) for n in names], tolerance=first.tolerance)


def _slot_order(spec, model):
    """The region's weights as its task takes them: the model's parameters, then its buffers (slots_of)."""
    params = dict(model.named_parameters())
    weights = list(spec.get("weights", []))
    return [n for n in weights if n in params] + [n for n in weights if n not in params]


def _task_weight_order(spec, op, model, live):
    """The region's weights (the live model's names) in its task's order: the importer's slots_of() of
    the region's module, parameters then buffers, each named after its dotted name ("." -> "_").
    (names, None), or (None, why) where the task's weights are not these (count, names, shapes)."""
    names = _slot_order(spec, model)
    missing = [n for n in names if n not in live]
    if missing:
        return None, "the model has no parameter or buffer %s" % ", ".join(missing)
    specs = op.task["inputs"][len(op.task["inputs"]) - len(op._weights["cpu"]):]
    if len(specs) != len(names):
        return None, "the task has %d weight(s), the plan's region %d" % (len(specs), len(names))
    for n, s, t in zip(names, specs, op._weights["cpu"]):
        if not _names_match(s["name"], n):
            return None, "the task's weight %s is not the region's parameter %s" % (s["name"], n)
        if list(t.shape) != list(live[n].shape) or t.dtype != live[n].dtype:
            return None, "%s: %s%s in the task, %s%s in the model" % (
                n, str(t.dtype).replace("torch.", ""), list(t.shape), str(live[n].dtype).replace("torch.", ""),
                list(live[n].shape))
    return names, None


def _names_match(task_name, param):
    """Whether a task's weight input is the parameter: the importer names it identifier(param with "." -> "_")
    (a "t_" prefix before a digit, a "_2" suffix where taken)."""
    attr = param.replace(".", "_")
    return re.fullmatch(r"(t_)?%s(_\d+)?" % re.escape(attr), task_name) is not None


def _live_tensors(model):
    live = dict(model.named_parameters())
    live.update(dict(model.named_buffers()))
    return live


def _mismatch_reasons(plan, graph, model, out_dir):
    """Why this model is not the one the plan was made from, as specific as the folder allows."""
    live = _live_tensors(model)
    why = []
    for spec in plan["regions"]:
        for n in spec.get("weights", []):
            if n not in live:
                why.append("the plan's parameter %s is not in the model" % n)
        if spec.get("status") != "task" or not spec.get("task"):
            continue
        task_json = os.path.join(out_dir, spec["task"], "task.json")
        try:  # (the plan was checked: the folder is inside the model folder)
            task = load_json_file(task_json, "a task file")
            ws = task["inputs"][len(task["inputs"]) - len(spec.get("weights", [])):]
        except (FileRefused, KeyError, TypeError) as e:
            why.append("region %s: %s" % (spec["name"], " ".join(str(e).split())[:200]))
            continue
        bound = (task.get("shapes") or [{}])[0]
        for n in spec.get("weights", []):
            w = next((w for w in ws if _names_match(w["name"], n)), None)
            if w is None or n not in live:
                continue
            shape = [d if isinstance(d, int) else bound.get(d) for d in w["shape"]]
            if list(live[n].shape) != shape:
                why.append("parameter %s: shape %s in the plan's task, %s in this model" % (n, shape, list(live[n].shape)))
            elif _torch_dtype(w["dtype"]) != live[n].dtype:
                why.append("parameter %s: %s in the plan's task, %s in this model" % (
                    n, w["dtype"], str(live[n].dtype).replace("torch.", "")))
    n_plan = max([s["nodes"][1] for s in plan["regions"] if s.get("nodes")] + [0])
    if n_plan and n_plan != len(graph.nodes):
        why.append("the traced graph has %d node(s), the plan's regions cover %d" % (len(graph.nodes), n_plan))
    return why or ["the traced graph or its parameters differ (op kinds, parameter names/shapes/dtypes or input "
                   "shapes/dtypes: the fingerprint is not the plan's)"]


def _match_partition(plan, graph):
    """The graph's regions (graph.partition at the plan's threshold) matched to the plan's by name and
    node range: {plan region name: index for graph.run's replace}, or (None, why)."""
    parts = graph.partition(plan.get("threshold", 0.0))
    index = {}
    for k, r in enumerate(parts):
        index[r.name] = (k, r)
    found = {}
    for spec in plan["regions"]:
        hit = index.get(spec["name"])
        if hit is None:
            return None, parts, "the traced graph has no region %s" % spec["name"]
        k, r = hit
        if spec.get("nodes") and [r.start, r.end] != list(spec["nodes"]):
            return None, parts, "region %s covers nodes [%d, %d) here, %s in the plan" % (spec["name"], r.start, r.end, spec["nodes"])
        found[spec["name"]] = k
    return found, parts, None


class _Traced(nn.Module):
    """The interpreter with the replacements, as a module holding the user's model (torch.jit.trace
    then reads the weights as the model's attributes: live, not constants of the trace)."""

    def __init__(self, owner):
        super().__init__()
        self.model = owner.model
        self._owner = [owner]  # not a submodule (no cycle)

    def forward(self, *inputs):
        return self._owner[0]._interpret(*inputs)


def _key(inputs):
    return tuple((tuple(t.shape), t.dtype, str(t.device)) for t in inputs)


class KernelEvoModel(nn.Module):
    """The user's model with its evolved regions as kernelevo operators (load_model). forward takes
    the model's arguments; `regions` lists (name, "kernel"|"pytorch", reason), report() says it all.
    The user's model is a submodule: its parameters are shared, not copied (a fine-tuned weight is used
    by the kernels too). Runs the original model unchanged where the plan does not fit it (`mismatch`)."""

    def __init__(self, model, plan, out_dir, graph=None, regions=(), mismatch=None):
        super().__init__()
        self.model = model
        self.plan, self.out_dir, self._graph = plan, out_dir, graph
        self._regions = list(regions)
        self._parts = []  # the graph's Regions (graph.partition), indexed by LoadedRegion.index
        self.mismatch = list(mismatch or [])
        self._set_traced(None, None)
        # What the graph was traced for: the model's device and mode at load, and the plan's input shapes.
        self._device, self._training, self._structure = str(model_device(model)), model.training, "tensor"
        self._plan_key = tuple((tuple(int(d) for d in s["shape"]), _torch_dtype(s["dtype"])) for s in plan["inputs"])
        self.runner = "the original model (no region replaced)"
        self.check = "not needed: no region runs as a kernel"
        try:  # inspect.signature(loaded) is the model's forward's
            object.__setattr__(self, "__signature__", inspect.signature(model.forward))
        except (TypeError, ValueError):
            pass
        self._sync_runner()

    def _set_traced(self, traced, key):
        # Not a submodule (no second copy of the weights' names in state_dict, no .to() of its own).
        object.__setattr__(self, "_traced", traced)
        object.__setattr__(self, "_traced_key", key)

    @property
    def regions(self):
        return [(r.name, r.status, r.reason) for r in self._regions]

    def _kernels(self):
        return [r for r in self._regions if r.status == "kernel"]

    def _replace(self, regions=None):
        return {r.index: r.call for r in (self._kernels() if regions is None else regions)}

    def _interpret(self, *inputs):
        outs = self._graph.run(list(inputs), replace=self._replace())
        if self._structure == "tensor" and len(outs) == 1:
            return outs[0]
        return list(outs) if self._structure == "list" else tuple(outs)

    def _sync_runner(self):
        if self.mismatch or not self._kernels():
            self._set_traced(None, None)
            self.runner = "the original model (%s)" % ("the plan does not fit it" if self.mismatch else "no region replaced")
        elif self._traced is None:
            self.runner = "the graph interpreter (Python, one call per node)"

    def _inputs(self, args, kwargs):
        if kwargs:
            bound = inspect.signature(self.model.forward).bind(*args, **kwargs)
            bound.apply_defaults()
            args = tuple(bound.arguments.values())
        return [a for a in args if isinstance(a, torch.Tensor)]

    def _weights_id(self):
        """The identity of the model's weight tensors: a parameter the user replaced by another object
        is not the one the trace reads (an in-place update is)."""
        return tuple(id(t) for t in self.model.parameters()) + tuple(id(t) for t in self.model.buffers())

    def forward(self, *args, **kwargs):
        if self.mismatch or not self._kernels():
            return self.model(*args, **kwargs)
        inputs = self._inputs(args, kwargs)
        key = _key(inputs)
        # The graph and the regions' tasks are the plan's shapes and dtypes, traced on the model's device
        # at load in its mode then: other calls (and a model moved or put in training mode) run the model.
        if tuple(k[:2] for k in key) != self._plan_key or any(k[2] != self._device for k in key) or \
                self.model.training != self._training:
            return self.model(*args, **kwargs)
        grad = torch.is_grad_enabled() and any(p.requires_grad for p in self.model.parameters())
        if self._traced is not None and not grad and (key, self._weights_id()) == self._traced_key:
            return self._traced(*inputs)
        return self._interpret(*inputs)

    def trace(self, inputs):
        """torch.jit.trace of the interpreter with its replacements (the operators are dispatcher ops:
        recorded, not inlined), used for calls of these shapes, dtypes and device without autograd; the
        interpreter otherwise. Kept only where it gives the interpreter's outputs on `inputs`."""
        self._set_traced(None, None)
        self._sync_runner()
        kernels = self._kernels()
        if self.mismatch or not kernels:
            return
        untraceable = [r.name for r in kernels if not r.traceable]
        if untraceable:
            self.runner += "; not traced: region(s) %s call their kernel outside the dispatcher" % ", ".join(untraceable)
            return
        try:
            with torch.no_grad(), warnings.catch_warnings():
                warnings.simplefilter("ignore")
                traced = torch.jit.trace(_Traced(self), tuple(inputs), check_trace=False)
                same = needed_tolerance(seeded(lambda: traced(*inputs), inputs),
                                        seeded(lambda: self._interpret(*inputs), inputs)) <= 1e-6
        except Exception as e:
            self.runner += "; torch.jit.trace failed: %s: %s" % (type(e).__name__, " ".join(str(e).split())[:200])
            return
        if not same:
            self.runner += "; torch.jit.trace gave other outputs than the interpreter: not used"
            return
        self._set_traced(traced, (_key(inputs), self._weights_id()))
        self.runner = ("torch.jit.trace of the interpreter for inputs %s on %s without autograd (else the interpreter; "
                       "inputs of other shapes or dtypes than the plan's run the original model)" % (
                           ", ".join("%s%s" % (str(d).replace("torch.", ""), list(s)) for s, d, _ in self._traced_key[0]),
                           self._traced_key[0][0][2] if self._traced_key[0] else "?"))

    def report(self):
        p = self.plan
        lines = ["kernelevo model %s from %s (plan %s, fingerprint %s...)" % (
            p.get("model", "?"), self.out_dir, p.get("format"), str(p.get("fingerprint", ""))[:12])]
        if self.mismatch:
            lines.append("the plan does not fit this model, it runs unchanged: " + "; ".join(self.mismatch))
        n = len(self._kernels())
        lines.append("%d of %d region(s) run as kernels; forward: %s" % (n, len(self._regions), self.runner))
        lines.append("check: %s" % self.check)
        width = max([len(r.name) for r in self._regions] + [6])
        lines.append("  %-*s  %-9s  %-7s  %6s  %s" % (width, "region", "kind", "runs", "share", "reason"))
        for r in self._regions:
            lines.append("  %-*s  %-9s  %-7s  %6s  %s" % (width, r.name, r.kind, r.status, _pct(r.share), r.reason))
        return "\n".join(lines)


def seeded(fn, inputs, seed=CHECK_SEED):
    """fn() with torch's generators seeded (and restored after: the user's RNG state is untouched), so that
    ops the check leaves in PyTorch that draw random numbers (a training-mode Dropout, refused at export)
    draw the same in the original and in the loaded model: they run the same ops in the same order."""
    devices = sorted({x.device.index or 0 for x in inputs if x.is_cuda})
    with torch.random.fork_rng(devices=devices):
        torch.manual_seed(seed)
        return fn()


def record_regions(loaded, inputs, regions):
    """One run of the ORIGINAL computation (every region as its own PyTorch ops, region_module) that
    records each given region's input activations and outputs: {index: (inputs, outputs)}."""
    records = {}

    def recorder(r):
        module = region_module(loaded._graph, loaded._parts[r.index])

        def run(acts):
            outs = module(*acts)
            outs = list(outs) if isinstance(outs, (tuple, list)) else [outs]
            records[r.index] = (list(acts), outs)
            return outs
        return run
    with torch.no_grad():
        seeded(lambda: loaded._graph.run(list(inputs), replace={r.index: recorder(r) for r in regions}), inputs)
    return records


def _check_regions(loaded, inputs):
    """Each kernel region on the original's own activations against the original's outputs, within its
    task's tolerance (the judge's rule); a region outside it is disabled with the reason."""
    kernels = loaded._kernels()
    records = record_regions(loaded, inputs, kernels)
    failed = []
    for r in kernels:
        if r.index not in records:
            r.disable("the check: the region was not reached when the graph ran")
            failed.append(r.name)
            continue
        acts, want = records[r.index]
        with torch.no_grad():
            try:
                r.check_t = needed_tolerance(r.call(acts), want)
            except Exception as e:
                r.check_t = math.inf
                r.disable("the check: the kernel raised %s: %s" % (type(e).__name__, " ".join(str(e).split())[:200]))
                failed.append(r.name)
                continue
        if not r.check_t <= r.tolerance:
            r.disable("the check on fresh inputs: its output differs from the original's beyond its task's tolerance "
                      "(needs %.3g, task tolerance %.3g; the judge's rule)" % (r.check_t, r.tolerance))
            failed.append(r.name)
        elif not _reads_its_weights(loaded, r, acts):
            failed.append(r.name)
    return failed


def _reads_its_weights(loaded, r, acts):
    """The region once more with each parameter's values moved one place along (the same values at other
    positions, as a fine-tuned or reloaded model has others) against its own PyTorch ops on them: the
    judge validated the kernel with one set of weights, and a kernel that kept a copy of the first weights
    it saw (a pre-packed matrix) would give the old model's results. Buffers (masks, running statistics)
    stay as they are. False (and the region disabled, saying why) when it does not compute with them."""
    module = region_module(loaded._graph, loaded._parts[r.index])
    moved = []
    with torch.no_grad():
        for w in r.weights:
            live = w()
            t = live.detach()
            m = torch.roll(t.flatten(), 1).view_as(t) if isinstance(live, nn.Parameter) and t.numel() > 1 else t
            getattr(module, "_".join(w.path)).copy_(m)
            moved.append(m)
        try:
            t = needed_tolerance(r.op.call(list(acts), moved), module(*acts))
        except Exception as e:
            t, why = math.inf, "%s: %s" % (type(e).__name__, " ".join(str(e).split())[:200])
        else:
            why = "needs %.3g, task tolerance %.3g" % (t, r.tolerance)
    if t <= r.tolerance:
        return True
    r.disable("the check with its parameters' values moved (as after fine-tuning or loading others): its output is not "
              "the region's on them (%s): the kernel does not compute with the weights it is given" % why)
    return False


def _end_to_end(loaded, inputs, expected):
    """(passes, needed t, combined tolerance): the loaded model's outputs against the original's within
    the largest tolerance of the replaced regions' tasks (the judge's rule at atol = rtol = it)."""
    kernels = loaded._kernels()
    tol = max([r.tolerance for r in kernels] + [0.0])
    with torch.no_grad():
        got = seeded(lambda: loaded._interpret(*inputs), inputs)
    t = needed_tolerance(got, expected)
    return t <= tol, t, tol


def run_check(loaded, seed=CHECK_SEED):
    """check=True of load_model: fresh random inputs (not the export's), the original model against the
    interpreter (which must reproduce it exactly), each kernel region against the original's values,
    then the whole model; regions are disabled until it passes. Returns the names disabled."""
    inputs = plan_inputs(loaded.plan, model_device(loaded.model), seed=seed)
    with torch.no_grad():
        expected = seeded(lambda: loaded.model(*inputs), inputs)
        plain = seeded(lambda: loaded._graph.run(list(inputs)), inputs)
    if needed_tolerance(plain, expected) > 1e-6:
        loaded.mismatch.append("the traced graph does not reproduce the model on fresh inputs (its interpreter differs "
                               "by %.3g in tolerance units): a graph.py problem" % needed_tolerance(plain, expected))
        for r in loaded._regions:
            if r.status == "kernel":
                r.disable("the model runs unchanged (the traced graph does not reproduce it)")
        loaded.check = "not applicable: the traced graph does not reproduce the model"
        return [r.name for r in loaded._regions]
    disabled = _check_regions(loaded, inputs)
    ok, t, tol = _end_to_end(loaded, inputs, expected)
    # Compounded error: the regions with the largest own error go first, until the model passes.
    for r in sorted(loaded._kernels(), key=lambda r: -(r.check_t or 0.0)):
        if ok:
            break
        r.disable("the end-to-end check on fresh inputs failed with it in (needs %.3g, allowed %.3g): stays in PyTorch"
                  % (t, tol))
        disabled.append(r.name)
        ok, t, tol = _end_to_end(loaded, inputs, expected)
    n = len(loaded._kernels())
    loaded.check = ("passed on fresh random inputs (seed %d): the loaded model's outputs need tolerance %.3g, allowed %.3g "
                    "(the largest atol/rtol of the %d replaced region(s)' task.json, by the judge's rule)" % (seed, t, tol, n)
                    if n else "no region left as a kernel: the model runs its own PyTorch code")
    if disabled:
        loaded.check += "; disabled: " + ", ".join(disabled)
    return disabled


def load_model(out_dir, model, cache_dir=None, arch=None, kernelevo=None, check=True, verbose=False, min_speedup=1.0):
    """The user's `model` with the regions of the model folder OUT_DIR (kernelevo.export_model) whose
    cached kernels are usable replaced by their operators torch.ops.kernelevo.NAME: a KernelEvoModel.

    out_dir: the model folder (plan.json, regions/, cache/). model: the live module the plan was made
        from (its weights may have changed since: the kernels take the live weights, in each task's order).
    cache_dir: the kernel cache (default OUT_DIR/cache, where `kernelevo search --model-dir` puts them).
    arch, kernelevo, verbose: as load_op (the architecture's entry, the kernelevo program that checks the
        entries' task hashes, the build's output).
    check: run an end-to-end check on fresh random inputs (not the export's) and fall back region by region
        until it passes (run_check); a warning names every region disabled.
    min_speedup: a kernel whose entry measured less than this over its LibTorch reference when it was
        validated stays in PyTorch, with the figure as the reason (1.0: only kernels that were faster; 0:
        every usable kernel). An entry without a measured speedup (validated without timing) runs.

    The model is re-traced (graph.ModelGraph) with random inputs of the plan's shapes and dtypes; where its
    fingerprint is not the plan's (another architecture, a parameter of another shape), the result runs the
    model unchanged and a warning says why. Regions the plan left in PyTorch (below threshold, refused,
    failed, views) stay there with the plan's reason, as does every region whose op has no usable kernel."""
    out_dir = os.path.abspath(out_dir)
    plan = read_plan(out_dir)
    cache_dir = cache_dir or os.path.join(out_dir, "cache")
    device = model_device(model)
    examples = plan_inputs(plan, device, seed=0)
    try:
        with torch.no_grad():
            graph = ModelGraph.trace(model, tuple(examples))
            structure = _structure(model(*examples))
    except Exception as e:
        return _unchanged(model, plan, out_dir, None, ["it cannot be traced on random inputs of the plan's shapes %s "
                                                       "(%s: %s)" % ([s["shape"] for s in plan["inputs"]], type(e).__name__,
                                                                     " ".join(str(e).split())[:300])])
    if structure.startswith("the model"):
        return _unchanged(model, plan, out_dir, graph, [structure])
    if graph.fingerprint() != plan.get("fingerprint"):
        why = _mismatch_reasons(plan, graph, model, out_dir)
        return _unchanged(model, plan, out_dir, graph, why)
    found, parts, why = _match_partition(plan, graph)
    if found is None:
        return _unchanged(model, plan, out_dir, graph, [why])
    live = _live_tensors(model)
    regions = []
    for spec in plan["regions"]:
        k = found[spec["name"]]
        if spec.get("status") == "task" and spec.get("task"):
            regions.append(_load_region(spec, k, out_dir, model, live, cache_dir, arch, kernelevo, verbose, min_speedup))
        elif spec.get("status") == "repeat" and spec.get("same_as"):
            first = next((r for r in regions if r.name == spec["same_as"]), None)
            first_spec = next((s for s in plan["regions"] if s["name"] == spec["same_as"]), None)
            regions.append(_repeat_region(spec, k, first, first_spec, model, live))
        else:
            regions.append(LoadedRegion(spec, k, "pytorch", _plan_reason(spec)))
    loaded = KernelEvoModel(model, plan, out_dir, graph, regions)
    loaded._parts, loaded._structure = list(parts), structure
    _warn_unused_entries(out_dir, regions, cache_dir)
    if check and loaded._kernels():
        disabled = run_check(loaded)
        if disabled:
            why = {r.name: r.reason for r in loaded._regions}
            warnings.warn("kernelevo.load_model(%s): the check disabled region(s) %s; then: %s" % (
                os.path.basename(out_dir), "; ".join("%s (%s)" % (n, why[n]) for n in disabled), loaded.check),
                stacklevel=2)
    elif not check:
        loaded.check = "not run (check=False)"
    loaded.trace(plan_inputs(plan, device, seed=1))
    return loaded


def _warn_unused_entries(out_dir, regions, cache_dir):
    """One warning naming each region whose cache folder holds a kernel that it does not run, and why
    (the kernelevo program not found, a stale or edited entry, another GPU, ...)."""
    unused = []
    for r in regions:
        if r.status != "pytorch" or r.plan_status != "task" or not r.task:
            continue
        folder = os.path.join(cache_dir, os.path.basename(os.path.normpath(r.task)))
        if os.path.isdir(folder) and any(f.endswith(".cu") for f in os.listdir(folder)):
            unused.append("%s (%s)" % (r.name, r.reason))
    if unused:
        warnings.warn("kernelevo.load_model(%s): %d region(s) have a cached kernel but run in PyTorch: %s" % (
            os.path.basename(os.path.normpath(out_dir)), len(unused), "; ".join(unused)), stacklevel=3)


def _structure(out):
    """"tensor", "tuple" or "list" for what the graph's flat outputs can give back, else why not."""
    if isinstance(out, torch.Tensor):
        return "tensor"
    if isinstance(out, (tuple, list)) and all(isinstance(t, torch.Tensor) for t in out):
        return "list" if isinstance(out, list) else "tuple"
    return ("the model returns %s: load_model gives back a tensor or a flat tuple or list of tensors only"
            % type(out).__name__)


def _unchanged(model, plan, out_dir, graph, why):
    warnings.warn("kernelevo.load_model(%s): the plan was made from another model; running yours unchanged: %s" % (
        os.path.basename(out_dir), "; ".join(why)), stacklevel=3)
    regions = [LoadedRegion(s, None, "pytorch", "the plan does not fit this model") for s in plan["regions"]]
    loaded = KernelEvoModel(model, plan, out_dir, graph, regions, mismatch=why)
    loaded.check = "not run: the plan does not fit this model"
    return loaded
