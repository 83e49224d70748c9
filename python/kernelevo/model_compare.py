"""compare_model(): end-to-end and per-region times of a loaded model (load_model) against the original
module in PyTorch eager and under torch.compile, each speedup labelled with what it is against and at
which precision."""
import statistics
import time

import torch

from .model_folder import model_device, plan_inputs, read_plan
from .model_load import record_regions
from .torch_task import live_precision


def _sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def time_ms(fn, args, device, reps=20, warmup=3):
    """Median milliseconds of fn(*args) over reps calls after warmup, without autograd: CUDA events
    around each call on a GPU (synchronised), perf_counter on the CPU."""
    with torch.no_grad():
        for _ in range(warmup):
            fn(*args)
        _sync(device)
        samples = []
        for _ in range(max(1, reps)):
            if device.type == "cuda":
                a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                a.record()
                fn(*args)
                b.record()
                b.synchronize()
                samples.append(a.elapsed_time(b))
            else:
                t0 = time.perf_counter()
                fn(*args)
                samples.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(samples)


def precision_label(inputs):
    """What the three runs compute at: the inputs' dtypes and this process's TF32 flags (they all run
    in this process, so the same flags hold for eager, torch.compile and the loaded model's PyTorch parts)."""
    p = live_precision()
    dtypes = sorted({str(x.dtype).replace("torch.", "") for x in inputs})
    return "%s inputs, PyTorch's precision flags as set in this process (matmul TF32 %s, cuDNN TF32 %s)" % (
        "/".join(dtypes), "on" if p["matmul_tf32"] else "off", "on" if p["cudnn_tf32"] else "off")


def _compiled_ms(model, inputs, device, reps):
    """(ms, None) of torch.compile(model), or (None, "not measured: why")."""
    if not hasattr(torch, "compile"):
        return None, "not measured: PyTorch %s has no torch.compile (needs 2.0 or newer)" % torch.__version__
    if device.type != "cuda":
        return None, "not measured: the model is on %s, not a GPU" % device
    try:
        torch._dynamo.reset()  # (a fresh compile: one module after another would hit dynamo's recompile limit)
        compiled = torch.compile(model)
        return time_ms(compiled, inputs, device, reps=reps, warmup=3), None
    except Exception as e:
        return None, "not measured: torch.compile failed: %s: %s" % (type(e).__name__, " ".join(str(e).split())[:200])


def _inputs_of(loaded, inputs, device):
    if inputs is None:
        return plan_inputs(loaded.plan, device, seed=2)
    if isinstance(inputs, dict):
        return plan_inputs(inputs, device, seed=2)
    if isinstance(inputs, str):
        return plan_inputs(read_plan(inputs), device, seed=2)
    return list(inputs) if isinstance(inputs, (tuple, list)) else [inputs]


def _ratio(a, b):
    return round(a / b, 3) if a and b else None


def _region_times(loaded, inputs, device, reps):
    """Each kernel region: its original PyTorch ops (eager, region_module) and its operator, on the
    activations the original computes for these inputs."""
    from .graph import region_module
    kernels = loaded._kernels()
    records = record_regions(loaded, inputs, kernels) if kernels else {}
    rows = []
    for r in loaded._regions:
        row = {"name": r.name, "kind": r.kind, "runs": r.status, "share": r.share}
        if r.status == "kernel" and r.index in records:
            acts = records[r.index][0]
            original = region_module(loaded._graph, loaded._parts[r.index])
            row["pytorch_eager_ms"] = time_ms(original, acts, device, reps)
            row["kernel_ms"] = time_ms(lambda *a: r.call(a), acts, device, reps)
            row["speedup_vs_pytorch_eager"] = _ratio(row["pytorch_eager_ms"], row["kernel_ms"])
        else:
            row["reason"] = r.reason
        rows.append(row)
    return rows


def compare_model(model, loaded, inputs=None, reps=20, verbose=True):
    """Times the original `model` in PyTorch eager, torch.compile(model) (PyTorch >= 2.0 on a GPU; else
    "not measured: why") and `loaded` (load_model's KernelEvoModel) end to end, and each region that runs
    as a kernel against its own PyTorch ops; prints a table (verbose) and returns it as a dict.

    inputs: a tuple of the model's tensors, a plan (dict, or the model folder's path), or None (random
    inputs of loaded.plan's shapes). All times are medians of `reps` calls without autograd, in ms."""
    device = model_device(model)
    xs = _inputs_of(loaded, inputs, device)
    eager = time_ms(model, xs, device, reps)
    compiled, why = _compiled_ms(model, xs, device, reps)
    mine = time_ms(loaded, xs, device, reps)
    result = {
        "model": loaded.plan.get("model"), "device": str(device) + (
            " (%s)" % torch.cuda.get_device_name(device) if device.type == "cuda" else ""),
        "torch": torch.__version__, "precision": precision_label(xs),
        "inputs": [[str(x.dtype).replace("torch.", ""), list(x.shape)] for x in xs], "reps": reps,
        "runner": loaded.runner, "plan_precision": {k: loaded.plan.get(k) for k in ("precision", "matmul_tf32", "cudnn_tf32")},
        "region_baseline": ("each region's own PyTorch ops in eager mode (region_module: the graph interpreter runs "
                            "them one by one), against its operator (the kernel), on the activations the original "
                            "model computes for these inputs"),
        "end_to_end": {"pytorch_eager_ms": eager, "torch_compile_ms": compiled, "torch_compile": why or "measured",
                       "kernelevo_ms": mine, "speedup_vs_pytorch_eager": _ratio(eager, mine),
                       "speedup_vs_torch_compile": _ratio(compiled, mine)},
        "regions": _region_times(loaded, xs, device, reps),
    }
    _no_kernel_no_speedup(result)
    if verbose:
        print(format_comparison(result))
    return result


def _no_kernel_no_speedup(result):
    """A loaded model in which no region runs a kernel is the original's PyTorch ops: its times differ from
    eager's by how load_model runs them, which is no speedup of any kernel. Says so, and gives no speedup."""
    e = result["end_to_end"]
    e["kernel_regions"] = sum(1 for r in result["regions"] if r["runs"] == "kernel")
    if e["kernel_regions"] == 0:
        e["speedup_vs_pytorch_eager"] = e["speedup_vs_torch_compile"] = None
        e["no_kernel"] = ("no region runs a kernel (every region in PyTorch: see regions' reasons): the loaded "
                          "model's time is the original's ops as load_model runs them, not a kernel's speedup")


def _ms(x):
    return "-" if x is None else "%.4g ms" % x


def format_comparison(res):
    e = res["end_to_end"]
    lines = ["kernelevo compare_model: %s on %s, torch %s, %s; median of %d calls without autograd" % (
        res["model"], res["device"], res["torch"], res["precision"], res["reps"]),
        "  end to end: PyTorch eager %s, torch.compile %s, kernelevo (loaded model) %s" % (
            _ms(e["pytorch_eager_ms"]), _ms(e["torch_compile_ms"]) if e["torch_compile_ms"] else e["torch_compile"],
            _ms(e["kernelevo_ms"])),
        "  " + e["no_kernel"] if e.get("no_kernel") else
        "  speedup of the loaded model (same precision): vs PyTorch eager %s; vs torch.compile %s" % (
            "%.3gx" % e["speedup_vs_pytorch_eager"] if e["speedup_vs_pytorch_eager"] else "-",
            "%.3gx" % e["speedup_vs_torch_compile"] if e["speedup_vs_torch_compile"] else e["torch_compile"]),
        "  loaded model runs: %s" % res["runner"],
        "  regions (%s):" % res["region_baseline"]]
    for r in res["regions"]:
        if "kernel_ms" in r:
            lines.append("  region %s (%s): kernel %s vs its PyTorch eager ops %s: %.3gx vs PyTorch eager" % (
                r["name"], r["kind"], _ms(r["kernel_ms"]), _ms(r["pytorch_eager_ms"]), r["speedup_vs_pytorch_eager"] or 0))
        else:
            lines.append("  region %s (%s): PyTorch (%s)" % (r["name"], r["kind"], r.get("reason", "")))
    return "\n".join(lines)
