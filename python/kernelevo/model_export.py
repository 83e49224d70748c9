"""export_model(): a whole PyTorch model -> a model folder (model_plan.md): the traced graph cut into
regions an expert would fuse, each region's share of the model's time, and one task folder per
region worth a kernel (export_task of the region as a module with its weights bound)."""
import copy
import inspect
import json
import numbers
import os
import shutil
import sys

import torch
from torch import nn

from .graph import ModelGraph, _scope, identifier, input_names, region_module
from .partition import signature
from .torch_task import ExportError, _precision, export_task, live_precision

PLAN_FORMAT = "kernelevo-model-plan/1"
PLAN_KEYS = ("name", "task_name", "kind", "nodes", "ops", "time_ms", "share", "status", "reason", "task", "weights")


def _say(quiet, text):
    if not quiet:
        print("kernelevo: " + text, file=sys.stderr, flush=True)


def _check_args(model, example_inputs, out_dir, name, threshold, inputs):
    if not isinstance(model, nn.Module):
        raise TypeError("model: an nn.Module, not %s" % type(model).__name__)
    if not isinstance(out_dir, (str, os.PathLike)):
        raise TypeError("out_dir: a path, not %s" % type(out_dir).__name__)
    if isinstance(threshold, bool) or not isinstance(threshold, numbers.Real) or not 0 <= threshold < 1:
        raise ValueError("threshold: a fraction of the model's time in [0, 1), not %r" % (threshold,))
    if inputs not in ("random", "examples"):
        raise ValueError("inputs: 'random' or 'examples', not %r" % (inputs,))
    if name is not None and (not isinstance(name, str) or name != identifier(name, set())):
        raise ValueError("name %r: letters, digits and _ only, not starting with a digit" % (name,))
    examples = tuple(example_inputs) if isinstance(example_inputs, (tuple, list)) else (example_inputs,)
    if not examples:
        raise ValueError("example_inputs: at least one tensor")
    for k, x in enumerate(examples):
        if not isinstance(x, torch.Tensor):
            raise TypeError("example_inputs[%d]: a tensor, not %s" % (k, type(x).__name__))
    return examples


def _on_device(model, examples, device):
    """The model and examples on device: the user's module itself when it is there already, else a copy."""
    dev = torch.device(device)
    there = [p.device for p in list(model.parameters()) + list(model.buffers())]
    if all(_same(d, dev) for d in there):
        work = model
    else:
        try:
            work = copy.deepcopy(model).to(dev)
        except Exception as e:
            raise ExportError("cannot copy the model to %s (%s: %s); move it there first" % (
                device, type(e).__name__, e))
    return work, tuple(x.to(dev) for x in examples)


def _same(a, b):
    return a.type == b.type and (a.type != "cuda" or (a.index or 0) == (b.index or 0))


def _device_text(device):
    dev = torch.device(device)
    if dev.type == "cuda":
        return "%s (cuda)" % torch.cuda.get_device_name(dev)
    return dev.type


def export_model(model, example_inputs, out_dir, name=None, threshold=0.01, precision=None, device=None,
                 overwrite=False, quiet=False, inputs="random", source="export_model"):
    """Writes the model folder OUT_DIR (plan.json, plan.md, regions/TASK/ per region worth a kernel)
    and returns the path of its plan.json.

    model: an nn.Module, traced as it is (call .eval() for inference: Dropout and BatchNorm in
        training mode stay in PyTorch as refused regions); its weights are exported as they are.
    example_inputs: a tensor or a tuple of tensors (the forward's arguments): they fix the shapes.
    name: the model's name in the plan and the prefix of the task names (default: its class name).
    threshold: regions whose share of the model's time is below it stay in PyTorch.
    precision, inputs: as export_task (each region task gets them).
    device: where the model is traced, timed and checked ("cuda" when this PyTorch sees a GPU, else
        "cpu"); a model elsewhere is copied there (the user's module is never modified).
    overwrite: OUT_DIR holding a plan already is refused (FileExistsError) unless overwrite=True.
    source: the plan's "source" (the KernelBench importer passes the problem's path).
    Raises ExportError when the model cannot be traced faithfully as a whole."""
    examples = _check_args(model, example_inputs, out_dir, name, threshold, inputs)
    chosen = _precision(live_precision() if precision is None else precision)
    out_dir = os.path.abspath(os.fspath(out_dir))
    plan_path = os.path.join(out_dir, "plan.json")
    if os.path.exists(plan_path) and not overwrite:
        raise FileExistsError("%s exists already (a model exported before): pass overwrite=True to replace it, or "
                              "another out_dir" % plan_path)
    device = device or ("cuda" if torch.cuda.is_available() else "cpu")
    work, examples = _on_device(model, examples, device)
    model_name = name or type(model).__name__
    _say(quiet, "tracing %s on %s" % (model_name, device))
    g = ModelGraph.trace(work, examples)
    regions = g.partition(threshold)
    used = set()
    for r in regions:
        r.task_name = identifier("%s_%s" % (model_name.lower(), r.name.replace(".", "_")), used)
    _say(quiet, "%d op(s) in %d region(s); timing them" % (len(g.nodes), len(regions)))
    times = g.profile(regions, examples, reps=20 if device.startswith("cuda") else 5)
    total = sum(times)
    for r, t in zip(regions, times):
        r.time_ms, r.share = t, (t / total if total > 0 else 0.0)
    captured = _capture(g, regions, examples)
    _repeats(g, regions, threshold)
    _export_regions(g, regions, captured, out_dir, chosen, device, overwrite, quiet, inputs)
    _settle_repeats(regions)  # again: a repeat of a region whose export failed is not a repeat of a task
    compiled = _compiled_times(g, work, regions, captured, examples, device, quiet)
    plan = _plan(g, regions, model_name, source, chosen, device, total, threshold, compiled)
    _write(out_dir, plan, overwrite)
    _say(quiet, "wrote %s: %d task(s); next: kernelevo search --model-dir %s" % (
        plan_path, sum(r.status == "task" for r in regions), out_dir))
    return plan_path


def _capture(g, regions, examples):
    """Each region's input activations on the examples (returned) and its inputs' and outputs' specs."""
    captured, results = g.capture(regions, examples)
    for r, args, outs in zip(regions, captured, results):
        r.input_specs = [dict(name=n, **_spec(x)) for n, x in zip(input_names(r), args)]
        r.output_specs = [_spec(y) for y in outs]
        r.io_bytes = sum(_nbytes(x) for x in list(args) + list(outs))
    return captured


def _repeats(g, regions, threshold):
    """A task region computing what an earlier one computes (partition.signature, the same input and
    output shapes and dtypes, weights of the same shapes and dtypes: an RNN cell unrolled over time, a
    weight-tied layer, the blocks of a stack with weights of their own) is its repeat: status "repeat",
    same_as its name, no task of its own (load_model runs the first one's kernel there, on the repeat's
    own weights). The threshold applies to the first one's share with its repeats'; below it, all stay
    in PyTorch."""
    first, live = {}, g._params()
    for r in regions:
        r.same_as, r.group_share, r.repeats = None, r.share, 0
        if r.status != "task":
            continue
        sig = signature(g, r)
        if sig[0] == "unique":
            continue
        weights = [(str(live[n].dtype), list(live[n].shape)) for n in r.weights]
        rep = first.setdefault((sig, json.dumps([[dict(s, name=None) for s in r.input_specs], r.output_specs, weights])), r)
        if rep is not r:
            r.same_as = rep.name
            rep.group_share += r.share
            rep.repeats += 1
    for r in regions:
        if r.status == "task" and r.same_as is None and r.group_share < threshold:
            r.status, r.reason = "below_threshold", "%.2f%% of the model's time%s, below the threshold of %.2f%%" % (
                100 * r.group_share, " with its %d repeat(s)" % r.repeats if r.repeats else "", 100 * threshold)
    _settle_repeats(regions)


def _settle_repeats(regions):
    """Each repeat's status from its first region's: "repeat" where that one is a task, else the same
    status as it, saying so."""
    by_name = {r.name: r for r in regions}
    for r in regions:
        if r.same_as is not None:
            rep = by_name[r.same_as]
            if rep.status == "task" and r.weights == rep.weights:
                r.status, r.reason = "repeat", "computes what region %s computes (the same ops, weights and shapes): " \
                                               "runs its kernel" % rep.name
            elif rep.status == "task":
                r.status, r.reason = "repeat", "computes what region %s computes on weights of its own (the same ops " \
                                               "and shapes): runs its kernel on them" % rep.name
            else:
                r.status, r.reason = rep.status, "a repeat of region %s: %s" % (rep.name, rep.reason)


def _compiled_times(g, work, regions, captured, examples, device, quiet):
    """What a user compares with: torch.compile's time of the whole model and of each task region (its module,
    compiled on its captured activations), in milliseconds, and each task region's memory floor (the bytes its
    inputs, weights and outputs must move, at the copy bandwidth measured here). Returns {"total_ms", "note"}:
    total_ms None and note "not measured: why" where torch.compile cannot be timed (PyTorch before 2.0, not a
    GPU, a failed compile); the regions' compile_ms and floor_ms are None then (the search budgets by eager
    share)."""
    from .model_compare import _compiled_ms
    dev, reps = torch.device(device), 20
    for r in regions:
        r.compile_ms = r.floor_ms = None
    total, why = _compiled_ms(work, examples, dev, reps)
    if total is None:
        _say(quiet, "torch.compile %s; the search budgets by eager time" % why)
        return {"total_ms": None, "note": why}
    gbs, weights = _copy_bandwidth_gbs(dev), g.model.state_dict(keep_vars=True)
    for r, args in zip(regions, captured):
        if r.status == "task":
            r.compile_ms, _ = _compiled_ms(region_module(g, r), tuple(args), dev, reps)
            nbytes = r.io_bytes + sum(_nbytes(weights.get(w)) for w in r.weights)
            r.floor_ms = nbytes / (gbs * 1e6) if gbs else None
    return {"total_ms": total, "note": "measured"}


def _nbytes(x):
    return x.numel() * x.element_size() if isinstance(x, torch.Tensor) else 0


def _copy_bandwidth_gbs(dev):
    """GB/s of a device copy (read + write counted), the best of a few: the memory floors' rate."""
    if dev.type != "cuda":
        return None
    from .model_compare import time_ms
    a = torch.empty(64 << 20, dtype=torch.float32, device=dev)
    b = torch.empty_like(a)
    ms = time_ms(lambda: b.copy_(a), (), dev, reps=10, warmup=2)
    return 2 * a.numel() * a.element_size() / (ms * 1e6) if ms > 0 else None


def _export_regions(g, regions, captured, out_dir, chosen, device, overwrite, quiet, inputs):
    """export_task of each task region, on its captured input activations."""
    spec = {"policy": chosen["policy"], "cudnn_tf32": chosen["cudnn_tf32"], "matmul_tf32": chosen["matmul_tf32"]}
    for r, args in zip(regions, captured):
        if r.status != "task":
            continue
        _say(quiet, "exporting region %s (%s, %.1f%%) as %s" % (r.name, r.kind, 100 * r.share, r.task_name))
        try:
            module = region_module(g, r)
            module.kevo_source = region_source(g, r)
            export_task(module, tuple(args), os.path.join(out_dir, "regions"), name=r.task_name,
                        inputs=inputs, precision=spec, device=device, quiet=True, overwrite=overwrite)
        except (ExportError, RuntimeError, ValueError, TypeError) as e:
            r.status, r.reason = "failed", " ".join(str(e).split())[:500]
            _say(quiet, "region %s failed: %s" % (r.name, r.reason))


def region_source(g, region):
    """What the LLM reads as a region's problem.py: which part of the model the region is, and the
    source of the modules written by the user (not torch.nn's) that its ops come from: for each op,
    the nearest such module around it (the model at worst), each class once."""
    owners = []
    for node in g.nodes[region.start:region.end + 1]:
        owner = _user_owner(g.model, _scope(node))
        if owner not in owners:
            owners.append(owner)
    head = ["# Region `%s` (%s) of %s: %s. This task computes only these ops, on the activations and weights" % (
                region.name, region.kind, type(g.model).__name__, ", ".join(op.split("::")[-1] for op in region.ops)),
            "# graph.py lists (it is exact); the code below is the model's own, for context: %s" % ", ".join(
                "%s (%s)" % ("the model" if not path else "module " + path, type(m).__name__) for path, m in owners)]
    texts, seen = [], set()
    for _, m in owners:
        if type(m) not in seen:
            seen.add(type(m))
            texts.append(_class_source(type(m)))
    return "\n".join(head) + "\n" + "\n".join(texts)


def _user_owner(model, path):
    """(path, module): the module at `path` or the first above it whose class is not torch's."""
    parts = path.split(".") if path else []
    for k in range(len(parts), 0, -1):
        try:
            m = model.get_submodule(".".join(parts[:k]))
        except AttributeError:
            continue
        if not type(m).__module__.startswith("torch."):
            return ".".join(parts[:k]), m
    return "", model


def _class_source(cls):
    """The class's source; else (a class whose module is not importable, as a KernelBench problem run
    from its file) its own methods' sources, which their code objects locate."""
    try:
        return inspect.getsource(cls)
    except (OSError, TypeError):
        pass
    parts = []
    for name in ("__init__", "forward"):
        fn = cls.__dict__.get(name)
        try:
            parts.append(inspect.getsource(fn))
        except (OSError, TypeError):
            pass
    if not parts:
        return "# (the source of %s is not available)\n" % cls.__name__
    return "class %s(...):  # its __init__ and forward\n%s" % (cls.__name__, "\n".join(parts))


def _plan(g, regions, model_name, source, chosen, device, total, threshold, compiled):
    rows = []
    for r in regions:
        rows.append({"name": r.name, "task_name": r.task_name, "kind": r.kind, "nodes": [r.start, r.end],
                     "ops": r.ops, "time_ms": round(r.time_ms, 6), "share": round(r.share, 6), "status": r.status,
                     "reason": r.reason, "task": "regions/" + r.task_name if r.status == "task" else None,
                     "weights": r.weights, "inputs": r.input_specs, "outputs": r.output_specs,
                     "compile_ms": _rounded(r.compile_ms), "floor_ms": _rounded(r.floor_ms)})
        if r.status == "repeat":
            rows[-1]["same_as"] = r.same_as
        elif r.status == "task" and r.repeats:
            rows[-1]["repeats"], rows[-1]["share_with_repeats"] = r.repeats, round(r.group_share, 6)
    return {"format": PLAN_FORMAT, "model": model_name, "source": source, "fingerprint": g.fingerprint(),
            "precision": chosen["policy"], "cudnn_tf32": chosen["cudnn_tf32"], "matmul_tf32": chosen["matmul_tf32"],
            "device": _device_text(device), "torch": torch.__version__, "inputs": g.input_specs(),
            "total_ms": round(total, 6), "compile_total_ms": _rounded(compiled["total_ms"]),
            "compile": compiled["note"], "threshold": threshold, "regions": rows}


def _rounded(ms):
    return None if ms is None else round(ms, 6)


def _spec(x):
    if not isinstance(x, torch.Tensor):
        return {"type": type(x).__name__}
    return {"dtype": str(x.dtype).replace("torch.", ""), "shape": list(x.shape)}


def _coverage(regions):
    """How the model's time divides: what a search can work on, what stays in PyTorch and why."""
    parts = []
    for status, words in (("task", "in %d task region(s) a search works on"),
                          ("repeat", "in %d repeat(s) of a task region (each runs that region's kernel)"),
                          ("refused", "refused (%d region(s), stay in PyTorch)"),
                          ("below_threshold", "below the threshold (%d region(s), stay in PyTorch)"),
                          ("failed", "failed to export (%d region(s), stay in PyTorch)")):
        rs = [r for r in regions if r["status"] == status]
        if rs or status == "task":
            parts.append("%.1f%% %s" % (100 * sum(r["share"] for r in rs), words % len(rs)))
    return "Of the model's time: " + "; ".join(parts) + "."


def _table(plan):
    lines = ["# %s: %d region(s), %.3f ms in all (%s, %s)" % (plan["model"], len(plan["regions"]), plan["total_ms"],
                                                             plan["device"], plan["precision"]), "",
             "Times are each region's nodes run by kernelevo's interpreter of the traced graph (median, "
             "device-synchronised); regions below %.2f%% of the total stay in PyTorch." % (100 * plan["threshold"]), "",
             _coverage(plan["regions"]), "",
             ("torch.compile of the whole model: %.3f ms (the task regions' compiled times are in plan.json: "
              "`kernelevo search --model-dir` budgets by them)" % plan["compile_total_ms"]
              if plan["compile_total_ms"] is not None else "torch.compile: %s" % plan["compile"]), "",
             "| # | region | kind | ops | time (ms) | share | status |", "|---|---|---|---|---|---|---|"]
    for k, r in enumerate(plan["regions"]):
        ops = ", ".join(dict.fromkeys(o.split("::")[-1] for o in r["ops"]))
        status = r["status"] + (": " + r["reason"] if r["reason"] else "")
        if r.get("repeats"):
            status += " (with its %d repeat(s): %.1f%% of the time)" % (r["repeats"], 100 * r["share_with_repeats"])
        lines.append("| %d | %s | %s | %s | %.4f | %.1f%% | %s |" % (
            k, r["name"], r["kind"], ops, r["time_ms"], 100 * r["share"], status.replace("|", "/")))
    lines.append("| | total | | | %.4f | 100%% | |" % plan["total_ms"])
    return "\n".join(lines) + "\n"


def _write(out_dir, plan, overwrite):
    """plan.json and plan.md; with overwrite, the region folders of the old plan that the new one
    does not list are removed."""
    path = os.path.join(out_dir, "plan.json")
    if overwrite and os.path.exists(path):
        try:
            with open(path, encoding="utf-8") as f:
                old = json.load(f)
            keep = {r.get("task") for r in plan["regions"]}
            for r in old.get("regions", []):
                task = r.get("task")
                if task and task not in keep and task.startswith("regions/") and "/.." not in task:
                    shutil.rmtree(os.path.join(out_dir, task), ignore_errors=True)
        except (OSError, ValueError):
            pass
    os.makedirs(out_dir, exist_ok=True)
    for file, text in (("plan.json", json.dumps(plan, indent=2) + "\n"), ("plan.md", _table(plan))):
        with open(os.path.join(out_dir, file + ".tmp"), "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(os.path.join(out_dir, file + ".tmp"), os.path.join(out_dir, file))
