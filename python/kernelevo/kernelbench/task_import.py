"""One problem imported as one task (the levels 1 and 2; kernelevo.export_task's path too): the model
built and its inputs recorded, run eagerly, traced, the trace checked, its tolerance measured, the
task folder written and checked against the C++ reference (selfcheck), phase by phase."""
import contextlib
import fcntl
import inspect
import json
import os
import shutil
import time
import warnings

import torch
from torch import nn

from .common import (DTYPES, MAX_TENSORS, Phases, Refused, ShrinkRefused, dtype_of, identifier, load_problem, one_line,
                     task_name, write_raw)
from .dim_names import dims_with_names, role_names
from .fill import generated
from .graph_file import graph_file, graph_flops
from .problem import _meta_inputs, build_model, draw_inputs, shrink, shrunk_numel
from .selfcheck import refcheck
from .tolerance import DEFAULT_PRECISION, fp64_error, policy_error, tolerance_from, with_policy
from .trace import (Functional, check_graph, close, conversions_watched, fingerprint, flat_outputs, max_abs_diff,
                    refuse_data_conversions, slots_of, unwatched, value_dependent)

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


def import_one(path, args, reference_source, max_numel, emit, joint=False):
    """The problem file `path` as the task OUT/NAME/ (its progress lines through `emit`): its result."""
    phases = Phases(task_name(path), emit)
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
        result = _import_one(path, args, reference_source, src, mod, shrunk, phases)
    if shrunk:
        result["shrunk_numel"] = shrunk_numel(mod, max_numel)
    return result


def _import_one(path, args, reference_source, src, mod, changed, phases, name=None):
    """One problem; `name` (default: from the file name) is the task's name. python/kernelevo's
    export_task() calls this with a module object of its own (a live nn.Module, no problem file)."""
    t0 = time.time()
    p = ProblemImport(path, args, mod, changed, name or task_name(path))
    result = {"source": os.path.abspath(path), "name": p.name}
    if changed:
        result["shrunk"] = {k: v[1] for k, v in changed.items()}
    for step, phase in ((p.build, "build"), (p.inputs, "inputs"), (p.run_eager, "eager"), (p.trace, "trace"),
                        (p.check_trace, "check"), (p.measure_tolerance, "fp64")):
        step()
        phases.done(phase)
    task = p.write(reference_source, src)
    phases.done("write")
    p.release()
    if args.refcheck:
        check = p.self_check()
        phases.done("refcheck")
        if not check.get("ok"):
            shutil.rmtree(p.tmp_dir, ignore_errors=True)
            result.update({"status": "failed", "reason": "self-verification failed: " + one_line(check.get("error", "mismatch")),
                           "verify": p.verify, "seconds": time.time() - t0})
            return result
    shutil.rmtree(p.out_dir, ignore_errors=True)
    os.replace(p.tmp_dir, p.out_dir)
    # The task as JSON too: `kernelevo import kernelbench` writes the suite's task.json from it (after
    # checking it), never the file written here, in the problem's private folder.
    result.update({"status": "ok", "task": os.path.join(p.out_dir, "task.json"), "task_json": task, "verify": p.verify,
                   "inputs": len(p.input_specs), "parameters": len(p.slot_specs), "outputs": len(p.out_names),
                   "notes": p.notes, "tolerance": task["tolerance"], "flops": {"total": p.flops, "by_kind": p.flops_by_kind},
                   "phases": phases.seconds, "seconds": time.time() - t0})
    return result


class ProblemImport:
    """One problem's import, phase by phase (_import_one runs them in order). What a phase finds is
    kept for the later ones; release() drops what the self-check does not need (device memory)."""

    def __init__(self, path, args, mod, changed, name):
        self.path, self.args, self.mod, self.name = path, args, mod, name
        self.device = torch.device(args.device)
        self.notes, self.verify, self.used = [], {}, set()
        self.shrunk_note = ""
        if changed:
            self.shrunk_note = " (with sizes shrunk by --max-numel: %s)" % ", ".join(
                "%s=%s" % (k, v[1]) for k, v in changed.items())
            self.notes.append("sizes shrunk for this machine: " + ", ".join(
                "%s %s->%s" % (k, a, b) for k, (a, b) in changed.items()))

    def _failed(self, what, e):
        """A failure that may be due to the shrunk sizes (then worth another try with larger ones)."""
        return (ShrinkRefused if self.shrunk_note else Refused)("%s%s: %s: %s" % (
            what, self.shrunk_note, type(e).__name__, one_line(e)))

    def build(self):
        """The model as KernelBench builds it, on the device; refused in training mode."""
        model = build_model(self.mod, self.shrunk_note)
        for m in model.modules():
            if isinstance(m, nn.modules.batchnorm._BatchNorm) and m.training:
                raise Refused("BatchNorm in training mode (KernelBench never calls eval()): it normalizes with batch "
                              "statistics and updates its running statistics on every call")
            if isinstance(m, nn.modules.dropout._DropoutNd) and m.training and m.p > 0:
                raise Refused("Dropout (p=%g) in training mode (KernelBench never calls eval()): random output" % m.p)
        self.model = model.to(self.device)
        self.slots = slots_of(self.model)
        for n, t in self.slots:
            dtype_of(t, "parameter " + n)

    def draw(self, seed):
        return draw_inputs(self.mod, self.args, seed, self.shrunk_note)

    def inputs(self):
        """get_inputs() drawn with seed 42 and recorded: the task's inputs (specs), then its parameters
        and buffers, and the forward's arguments on the device."""
        raw, self.rec = self.draw(42)
        self.raw = raw
        self.raw_values = [None if isinstance(x, torch.Tensor) else x for x in raw]
        self.tensor_pos = [i for i, x in enumerate(raw) if isinstance(x, torch.Tensor)]
        if not self.tensor_pos:
            raise Refused("get_inputs() returns no tensor")
        for i, x in enumerate(raw):
            if not isinstance(x, torch.Tensor) and not isinstance(x, (int, float, bool, type(None), str)):
                raise Refused("input %d is a %s (only tensors and plain numbers are supported)" % (i, type(x).__name__))
        if len(self.tensor_pos) + len(self.slots) > MAX_TENSORS:
            raise Refused("%d inputs plus %d parameters and buffers: a task holds at most %d inputs" % (
                len(self.tensor_pos), len(self.slots), MAX_TENSORS))
        if len(self.tensor_pos) < len(raw):
            self.notes.append("non-tensor inputs fixed as constants: " + ", ".join(
                repr(raw[i]) for i in range(len(raw)) if i not in self.tensor_pos))
        self.input_specs = self._input_specs(raw)
        params = {n for n, _ in self.model.named_parameters()}
        self.slot_specs = [{"name": identifier(n.replace(".", "_"), self.used), "dtype": DTYPES[t.dtype], "tensor": t,
                            "init": None, "slot": n, "parameter": n in params} for n, t in self.slots]
        self.call_args = [x.to(self.device) if isinstance(x, torch.Tensor) else x for x in raw]
        self.dev_inputs = [self.call_args[i] for i in self.tensor_pos]
        self.slot_values = [t.detach() for _, t in self.slots]

    def _input_specs(self, raw):
        """Each tensor input's name (the forward's parameter), dtype, tensor and init (its recorded
        distribution where the task can state it for its dtype; None: stored as it was drawn)."""
        try:
            params = list(inspect.signature(self.model.forward).parameters.values())
            pnames = [p.name for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
        except (TypeError, ValueError):
            pnames = []
        specs = []
        for k, i in enumerate(self.tensor_pos):
            x = raw[i]
            what = "input %s" % (pnames[i] if i < len(pnames) else i)
            dt = dtype_of(x, what)
            init = self.rec.init_of(x)
            if init is not None and init["kind"] in ("rand", "randn") and not x.is_floating_point():
                init = None
            if init is not None and init["kind"] == "randint" and (x.is_floating_point() or (
                    x.dtype == torch.bool and (init["low"], init["high"]) != (0, 2))):
                init = None
            specs.append({"name": identifier(pnames[i] if i < len(pnames) else "x%d" % k, self.used), "dtype": dt,
                          "tensor": x, "init": init})
        return specs

    def run_eager(self):
        """Eager, as KernelBench runs it; refused when it changes its inputs in place."""
        before = [fingerprint(x) for x in self.dev_inputs]
        with torch.no_grad():
            try:
                self.eager = flat_outputs(self.model(*self.call_args))
            except Refused:
                raise
            except Exception as e:
                raise self._failed("the model's forward failed", e)
        if [fingerprint(x) for x in self.dev_inputs] != before:
            raise Refused("forward modifies its input in place")
        for k, o in enumerate(self.eager):
            dtype_of(o, "output %d" % k)
        if len(self.eager) > MAX_TENSORS:
            raise Refused("%d outputs: a task holds at most %d" % (len(self.eager), MAX_TENSORS))

    def trace(self):
        """The functional wrapper traced: inputs, then parameters and buffers."""
        self.wrapper = Functional(self.model, self.call_args, self.tensor_pos, [n for n, _ in self.slots])
        with torch.no_grad(), warnings.catch_warnings(record=True) as caught, conversions_watched() as events:
            warnings.simplefilter("always")
            try:
                self.traced = torch.jit.trace(self.wrapper, tuple(self.dev_inputs + self.slot_values), check_trace=False)
            except Exception as e:
                raise Refused("tracing failed: %s: %s" % (type(e).__name__, one_line(e)))
        self.caught, self.events = caught, events
        # A tensor turned into a Python value in the problem's own code: a branch or a size taken from
        # the data. (PyTorch's own shape checks convert too; those, and sizes, depend on shapes only.)
        refuse_data_conversions(events, caught, self.path)
        check_graph(self.traced.graph)

    def check_trace(self):
        """The trace against eager: on these inputs when there is no C++ check (which runs the trace on
        them), and on a second draw when it may have baked in value-dependent decisions (a tracer
        warning, a tensor's values turned into a Python value, or an op whose output shape depends on
        the values; conversions the watched methods saw count only when their value is data)."""
        if not self.args.refcheck:
            with torch.no_grad():
                again = flat_outputs(self.traced(*self.dev_inputs, *self.slot_values))
            if len(again) != len(self.eager) or not all(close(a, b, 0, 0) or close(a, b, 1e-5, 1e-5)
                                                        for a, b in zip(again, self.eager)):
                raise Refused("the traced graph does not reproduce the model on the recorded inputs")
            del again
        if value_dependent(self.traced.graph, unwatched(self.caught)) or any(not e["shape"] for e in self.events):
            self.verify["trace_max_abs_diff_other_inputs"] = self._second_draw()
        else:
            self.verify["second_draw"] = ("skipped: no tracer warning, no tensor's values turned into a Python value "
                                          "(sizes only) and no op whose output depends on the values")

    def _second_draw(self):
        """max |trace - eager| on inputs drawn with seed 43; refused beyond 1e-5."""
        raw2, _ = self.draw(43)
        call2 = [x.to(self.device) if isinstance(x, torch.Tensor) else x for x in raw2]
        with torch.no_grad():
            eager2 = flat_outputs(self.model(*call2))
            traced2 = flat_outputs(self.traced(*[call2[i] for i in self.tensor_pos], *self.slot_values))
        trace_diff = max([max_abs_diff(a, b) for a, b in zip(traced2, eager2)] + [0.0])
        if len(traced2) != len(eager2) or not all(close(a, b, 1e-5, 1e-5) for a, b in zip(traced2, eager2)):
            raise Refused("the traced graph depends on the input values (data-dependent control flow): max |diff| %g on "
                          "other inputs" % trace_diff)
        return trace_diff

    def measure_tolerance(self):
        """The reference's own error (the model in fp64 on the same inputs, strict fp32, TF32 off) and
        the precision policy's: the task's tolerance."""
        measured, max_abs, why = fp64_error(self.model, self.call_args, self.eager)
        if measured is not None:
            self.verify["fp64_allclose_t"] = measured
            self.verify["fp64_max_abs_diff"] = max_abs
            if why:
                self.verify["fp64_note"] = why
        else:
            self.verify["fp64"] = "skipped: " + why
        atol, rtol, policy = tolerance_from(self.eager, measured)
        self.precision = getattr(self.args, "precision", None) or DEFAULT_PRECISION
        perr = policy_error(self.model, self.call_args, self.eager, self.precision)
        if perr is not None:
            self.verify["precision_allclose_t"] = perr
        self.atol, self.rtol, self.policy = with_policy(atol, rtol, policy, perr, self.precision)
        if self.args.device_kind == "cuda":
            torch.cuda.empty_cache()

    def write(self, reference_source, src):
        """The task folder, OUT/NAME.tmp until the self-check passes: model.pt, the inputs stored as
        files, task.json, problem.py and graph.py. Returns the task as JSON."""
        self.flops, self.flops_by_kind = graph_flops(self.traced.graph)
        self.out_dir = os.path.join(self.args.out, self.name)
        self.tmp_dir = self.out_dir + ".tmp"
        shutil.rmtree(self.tmp_dir, ignore_errors=True)
        os.makedirs(self.tmp_dir)
        self.traced.save(os.path.join(self.tmp_dir, "model.pt"))
        specs = self.input_specs + self.slot_specs
        for spec in specs:
            if spec["init"] is None:
                spec["init"] = {"kind": "file", "path": spec["name"] + ".bin"}
                if spec.get("parameter"):  # any values are valid: the judge varies them (a kernel must read them)
                    spec["init"]["parameter"] = True
                write_raw(spec["tensor"], os.path.join(self.tmp_dir, spec["name"] + ".bin"))
        derived = [s["name"] for s in self.input_specs if s["init"]["kind"] == "file"]
        if derived:
            self.notes.append("inputs computed from random values, stored as fixed files: " + ", ".join(derived))
        out_names = ["out"] if len(self.eager) == 1 else ["out%d" % k for k in range(len(self.eager))]
        self.out_names = [identifier(n, self.used) for n in out_names]
        shape_json, bound = self._named_shapes()
        task = self._task_json(reference_source, shape_json, bound)
        with open(os.path.join(self.tmp_dir, "task.json"), "w") as f:
            json.dump(task, f, indent=2)
            f.write("\n")
        with open(os.path.join(self.tmp_dir, "problem.py"), "w", encoding="utf-8") as f:
            f.write(src)
        with open(os.path.join(self.tmp_dir, "graph.py"), "w", encoding="utf-8") as f:
            f.write(graph_file(self.name, self.path, self.traced, specs, list(zip(self.out_names, self.eager)), shape_json,
                               bound, self.flops_by_kind))
        return task

    def _named_shapes(self):
        """The dimensions named by role (role_names), else by value: (tensor -> its named shape, {name: size})."""
        tensors = [s["tensor"] for s in self.input_specs + self.slot_specs] + self.eager
        shapes = [list(t.shape) for t in tensors]
        named, bound, naming_note = role_names(self.mod, shapes)
        if naming_note:
            self.notes.append("dimension names: " + naming_note + ("" if named else "; named by value instead"))
        if named is None:
            dim_names = dims_with_names(shapes, self.mod)
            bound = {v: k for k, v in dim_names.items()}
            named = [[dim_names.get(s, s) for s in shape] for shape in shapes]
        named_of = {id(t): names for t, names in zip(tensors, named)}
        return (lambda t: list(named_of[id(t)])), bound

    def _task_json(self, reference_source, shape_json, bound):
        notes, precision = self.notes, self.precision
        task = {
            "name": self.name,
            "description": "KernelBench problem %s, imported by kernelevo import kernelbench (torch %s)%s" % (
                os.path.basename(self.path), torch.__version__, "; " + "; ".join(notes) if notes else ""),
            "reference": {"source": os.path.relpath(reference_source, self.out_dir), "function": "kevo_kb::forward",
                          "signature": "vector", "setup": "kevo_kb::setup", "arg": "model.pt"},
            "inputs": [{"name": s["name"], "dtype": s["dtype"][0], "shape": shape_json(s["tensor"]), "init": s["init"]}
                       for s in self.input_specs + self.slot_specs],
            "outputs": [{"name": n, "dtype": DTYPES[o.dtype][0], "shape": shape_json(o)}
                        for n, o in zip(self.out_names, self.eager)],
            "tolerance": {"policy": self.policy},
            **({"precision": precision["task"]} if precision.get("task") is not None else {}),
        }
        task["reference"]["show"] = [
            {"file": "problem.py", "language": "python",
             "title": "The PyTorch model (KernelBench problem file; inputs come from get_inputs(), parameters follow "
                      "PyTorch's default initialisation)"},
            {"file": "graph.py", "language": "python",
             "title": "What it computes, as traced: the kernel's inputs in order, with the weights named as the kernel "
                      "receives them"}]
        if self.atol is not None:
            task["tolerance"].update({"atol": self.atol, "rtol": self.rtol})
        if self.flops > 0:
            task["flops"] = str(self.flops)
        if bound:
            task["shapes"] = [dict(sorted(bound.items()))]
        return task

    def release(self):
        """Drops what only the phases before the self-check needed: the device holds the model and the
        inputs stored as files; those a formula makes are made again for the check."""
        self.call_args = self.dev_inputs = self.slot_values = self.traced = self.wrapper = None
        self.raw = self.eager = self.rec = None
        for k, spec in enumerate(self.input_specs):
            if generated(spec["init"], spec["dtype"][0], k) is not None:
                spec["tensor"] = spec["tensor"].to("meta")
        if self.args.device_kind == "cuda":
            torch.cuda.empty_cache()

    def self_check(self):
        """kernelevo-refcheck on the written task against the Python model (selfcheck.refcheck)."""
        check = refcheck(self.args, self.tmp_dir, self.model, self.slots, (self.raw_values, self.tensor_pos),
                         self.input_specs + self.slot_specs, self.device, self.atol, self.verify)
        self.verify.update({"device": self.args.device_kind, "max_abs_diff": check.get("max_abs_diff"),
                            "ok": check.get("ok", False)})
        return check
