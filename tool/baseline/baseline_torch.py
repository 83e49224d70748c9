#!/usr/bin/env python3
"""The baselines users pick instead of a kernel: the task's PyTorch module in eager PyTorch, under
torch.compile (Inductor, default mode) and, when asked, compiled ahead of time by AOTInductor (what a
C++ user deploying through LibTorch runs), timed on the validator's inputs. Run by `kernelevo` (tool/baseline)
in the import's sandbox: the module is someone else's code.

Usage: baseline_torch.py SPEC.json, where SPEC (written by tool/baseline/baseline.cpp) holds
  task_dir, kernelevo_python (the folder holding the kernelevo package: kernelevo.kernelbench's filler, the
  validator's filler bit for bit),
  work_dir (the private folder AOTInductor's packages go to),
  precision (pytorch | strict | tf32 | bf16) with the TF32 flags the timed reference runs with
  (cudnn_tf32, matmul_tf32), l2_flush (read | none), warmup, trials, which
  (of "eager", "compile", "aoti") and sets: [{"set", "label", "inputs": [{"name", "dtype", "shape", "kind",
  "a", "b", "seeds": [one per copy], "file"}]}] (the task's timed shape sets, inputs in task order),
  turns (a folder, or "" without a GPU): everything but each set's timed calls runs with the GPU shared;
  before those, the script asks for the GPU alone there (gpu_alone).

The module: an imported KernelBench task's problem.py (Model built as KernelBench and the importer
build it: torch.manual_seed(42), get_init_inputs(), torch.manual_seed(42), Model(*init) on the CPU,
then moved to the GPU), or what export_task saved (model.pt2, a torch.export program of the live
module, named in pytorch.json). The module's own weights are the task's file inputs (the same values),
so only its call arguments are drawn: with the validator's filler and seeds, one set per copy.
Timing as the judge times the reference: each call after a read of a buffer 4x the L2 cache (l2_flush
read), CUDA events around the call only, warm-up calls (and torch.compile's compilation) excluded,
the median of `trials` calls.
AOTInductor: per timed set, torch.export.export(module, that set's arguments) (static shapes, as a
deployment for those shapes), torch._inductor.aoti_compile_and_package into work_dir, loaded back
with torch._inductor.aoti_load_package and called with the same arguments; its compilation is not
timed. torch.compile's and AOTInductor's outputs on each set's first copy must match eager's (check_outputs:
relative L2 error per output within CHECK_TOL of the precision) or the baseline is not run, with the error.

Prints one JSON object: {"eager_ms", "compile_ms", "aoti_ms" (the first timed set; null when not
run), "sets": [{"set", "label", "eager_ms", "compile_ms", "aoti_ms"}], "torch_version", "device",
"precision", "module", "not_run": {kind: "reason"}, "checks": {"compile"|"aoti": {"rel_l2", "tol"}},
"inductor": what torch.compile runs, from Inductor's generated code on the first timed set (capture_inductor):
{"code", "kernels", "library_calls", "bytes"} or {"not_captured": "reason"}}.
Never exits non-zero for a baseline that cannot run: the reason says why.
"""
import contextlib
import json
import os
import re
import statistics
import sys
import time
import types

KINDS = ("eager", "compile", "aoti")  # the order of baseline.cpp's table (kinds())
LABELS = {"eager": "eager", "compile": "torch.compile", "aoti": "AOTInductor"}


def one_line(text, limit=300):
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def emit(out):
    """Prints the answer; without Inductor's code, why torch.compile made none."""
    if out.get("inductor") is None:
        out["inductor"] = {"not_captured": "torch.compile made no code: %s" % out["not_run"].get("compile", "no call")}
    print(json.dumps(out), flush=True)
    return 0


def importer(spec):
    """The importer's code (kernelevo.kernelbench): its filler (refcheck_values), DTYPES, load_problem and
    on_meta are the one source."""
    sys.path.insert(0, spec["kernelevo_python"])
    from kernelevo.kernelbench import common, fill, problem
    return types.SimpleNamespace(DTYPES=common.DTYPES, refcheck_values=fill.refcheck_values,
                                 load_problem=common.load_problem, on_meta=problem.on_meta)


def set_precision(torch, spec):
    """torch's TF32 flags as the task's timed reference runs (its precision policy's, task/precision.h;
    for "pytorch" PyTorch's defaults or those the user's code set, as recorded in task.json), set after
    the module is loaded; returns the context the calls run in: bf16 runs them under
    torch.autocast(bfloat16), as a user who accepts bf16 would."""
    policy = spec["precision"]
    if policy not in ("pytorch", "strict", "tf32", "bf16"):
        raise ValueError("unknown precision policy %r (expected pytorch, strict, tf32 or bf16)" % policy)
    torch.backends.cudnn.allow_tf32 = bool(spec["cudnn_tf32"])
    torch.backends.cuda.matmul.allow_tf32 = bool(spec["matmul_tf32"])
    torch.set_float32_matmul_precision("high" if spec["matmul_tf32"] else "highest")
    if policy == "bf16":
        return lambda: torch.autocast(device_type="cuda", dtype=torch.bfloat16)
    return contextlib.nullcontext


def draw_inputs(torch, kb, spec_inputs, copy, device):
    """Input tensors of one copy: the validator's filler (generated kinds) or the task's file."""
    by_name = {v[0]: k for k, v in kb.DTYPES.items()}
    out = []
    for s in spec_inputs:
        dtype = by_name[s["dtype"]]
        if s["kind"] == "file":
            n = 1
            for d in s["shape"]:
                n *= d
            out.append(torch.from_file(s["file"], size=n, dtype=dtype).reshape(s["shape"]).to(device))
        else:
            gen = {"kind": s["kind"], "seed": s["seeds"][copy], "a": s["a"], "b": s["b"]}
            out.append(kb.refcheck_values(gen, s["shape"], dtype, device))
    return out


def kernelbench_module(torch, kb, task_dir, device):
    """(model, template): problem.py's Model as KernelBench builds it, and get_inputs()'s list drawn on
    meta (its plain numbers are the call's constants; its tensors are replaced by the task's inputs)."""
    _, mod = kb.load_problem(os.path.join(task_dir, "problem.py"))
    torch.manual_seed(42)
    init = mod.get_init_inputs()
    torch.manual_seed(42)
    model = mod.Model(*init).to(device)
    torch.manual_seed(42)
    try:
        with kb.on_meta():
            template = list(mod.get_inputs())
    except Exception:
        template = list(mod.get_inputs())
    return model, template


def exported_module(torch, task_dir, side):
    """(module, template): export_task's model.pt2 (torch.export of the live module) and its arguments."""
    saved = side.get("module_pt2")
    if not saved:
        raise LookupError(side.get("module_pt2_why") or "export_task saved no Python module (model.pt2) for this task; "
                          "export it again with PyTorch 2")
    if not hasattr(torch, "export"):
        raise LookupError("PyTorch %s cannot load model.pt2 (torch.export needs PyTorch 2)" % torch.__version__)
    program = torch.export.load(os.path.join(task_dir, saved))
    template = [TENSOR if "tensor" in a else a["constant"] for a in side["args"]]
    return program.module(), template


TENSOR = object()  # a tensor argument of an exported module (pytorch.json names it, not its shape)


def is_tensor_slot(torch, x):
    return x is TENSOR or isinstance(x, torch.Tensor)


def call_args(torch, template, tensors):
    """The module's arguments: the template's constants, its tensors replaced in order."""
    it = iter(tensors)
    return [next(it) if is_tensor_slot(torch, x) else x for x in template]


def check_template(torch, template, spec_inputs):
    """The number of tensor arguments; the shapes get_inputs() gives must be the task's."""
    slots = [x for x in template if is_tensor_slot(torch, x)]
    shapes = [list(x.shape) for x in slots if isinstance(x, torch.Tensor)]
    want = [s["shape"] for s in spec_inputs[: len(shapes)]]
    if len(slots) > len(spec_inputs) or shapes != want:
        raise LookupError("the module's inputs %s are not the task's %s (imported with --max-numel, or edited?)" % (shapes, want))
    return len(slots)


def make_flush(torch, mode, device):
    if mode == "none":
        return lambda: None
    l2 = getattr(torch.cuda.get_device_properties(device), "L2_cache_size", 0) or (64 << 20)
    buf = torch.ones(4 * l2 // 4, dtype=torch.int32, device=device)
    return lambda: buf.sum()


def time_calls(torch, fn, arg_sets, warmup, trials, flush, ctx):
    """Median ms of `trials` calls, each after the flush, events around the call only."""
    with torch.no_grad(), ctx():
        for k in range(warmup):
            fn(*arg_sets[k % len(arg_sets)])
        torch.cuda.synchronize()
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        times = []
        for t in range(trials):
            args = arg_sets[t % len(arg_sets)]
            flush()
            e0.record()
            fn(*args)
            e1.record()
            e1.synchronize()
            times.append(e0.elapsed_time(e1))
    return statistics.median(times)


# How far torch.compile's and AOTInductor's outputs may be from eager's: the relative L2 error of each
# output (||got - eager|| / ||eager||, in float64). Both compile the same graph with other kernels and
# another summation order; TF32 (cuDNN or cuBLAS allowed it) and bf16 (autocast) differ more between
# implementations. A scale-relative rule: a constant, zeros or a missing term are far outside it.
CHECK_TOL = {"strict": 1e-4, "tf32": 5e-3, "bf16": 2e-2}


def check_tol(spec):
    if spec["precision"] == "bf16":
        return CHECK_TOL["bf16"]
    return CHECK_TOL["tf32"] if spec.get("cudnn_tf32") or spec.get("matmul_tf32") else CHECK_TOL["strict"]


def flat_tensors(torch, x):
    if isinstance(x, torch.Tensor):
        return [x]
    if isinstance(x, (list, tuple)):
        return [t for v in x for t in flat_tensors(torch, v)]
    if isinstance(x, dict):
        return [t for k in sorted(x) for t in flat_tensors(torch, x[k])]
    return []


def check_outputs(torch, got, want, tol):
    """The largest relative L2 error over the outputs; raises ValueError past `tol` or on other outputs."""
    got, want = flat_tensors(torch, got), flat_tensors(torch, want)
    if len(got) != len(want):
        raise ValueError("%d outputs where eager gives %d" % (len(got), len(want)))
    worst = 0.0
    for i, (g, w) in enumerate(zip(got, want)):
        if tuple(g.shape) != tuple(w.shape):
            raise ValueError("output %d has shape %s where eager's is %s" % (i, list(g.shape), list(w.shape)))
        g, w = g.detach().double(), w.detach().double()
        if not torch.equal(torch.isnan(g), torch.isnan(w)):
            raise ValueError("output %d has NaNs where eager's has none, or none where eager's has" % i)
        g, w = torch.nan_to_num(g), torch.nan_to_num(w)
        err = float(torch.linalg.vector_norm(g - w)) / max(float(torch.linalg.vector_norm(w)), 1e-300)
        worst = max(worst, err)
        if not err <= tol:
            raise ValueError("output %d: relative L2 error %.3g > %.0e" % (i, err, tol))
    return worst


def checked(torch, out, kind, fn, args, want, tol, ctx):
    """Calls fn on args, checks its outputs against eager's (`want`), records the error in out["checks"]."""
    with torch.no_grad(), ctx():
        got = fn(*args)
    err = check_outputs(torch, got, want, tol)
    prev = out["checks"].get(kind, {}).get("rel_l2", 0.0)
    out["checks"][kind] = {"rel_l2": max(prev, err), "tol": tol}


class AotiStepError(RuntimeError):
    """A step of building the AOTInductor package failed; the message names it."""


def aoti_package(torch, model, args, ctx, path):
    """AOTInductor as a C++ deployment builds it: torch.export, then aoti_compile_and_package to `path`,
    loaded back with aoti_load_package. Raises AotiStepError naming the step that failed."""
    step = "import torch._inductor"

    def begin(name):  # on stderr before the step: a crash inside PyTorch is reported with its step's name
        print("aoti step: %s" % name, file=sys.stderr, flush=True)
        return name
    try:
        begin(step)
        import torch._inductor as inductor
        step = begin("torch.export.export")
        with ctx():
            program = torch.export.export(model, tuple(args))
        step = begin("torch._inductor.aoti_compile_and_package")
        with ctx():
            package = inductor.aoti_compile_and_package(program, package_path=path)
        step = begin("torch._inductor.aoti_load_package")
        return inductor.aoti_load_package(package)
    except Exception as e:
        raise AotiStepError("%s failed: %s: %s" % (step, type(e).__name__, one_line(e)))


def wanted(spec, out, kind):
    return kind in spec["which"] and kind not in out["not_run"]


def load_module(torch, kb, task_dir, device, out):
    side_path = os.path.join(task_dir, "pytorch.json")
    if os.path.isfile(side_path):
        with open(side_path, encoding="utf-8") as f:
            side = json.load(f)
        model, template = exported_module(torch, task_dir, side)
        out["module"] = "model.pt2 (export_task)"
        return model.to(device), template
    out["module"] = "problem.py (KernelBench)"
    return kernelbench_module(torch, kb, task_dir, device)


INDUCTOR_CODE_BYTES = 12000  # the most of Inductor's code the answer carries (the prompt shows it)
_TRITON_KERNEL = re.compile(r"^(\w+) = async_compile\.triton\(\s*'(\w+)',\s*'''(.*?)'''", re.S | re.M)
_CALL = re.compile(r"^([ \t]*)def call\((?:self, )?args\):\n", re.M)
_LIBRARY_CALL = re.compile(r"\b(extern_kernels\.\w+|aten\.\w+(?:\.\w+)?|torch\.ops\.\w+\.\w+(?:\.\w+)?)\(")
_NOISE = re.compile(r"\s*(assert_\w+\(|del |args\.clear\(\))")


def inductor_call_body(source):
    """Inductor's call(args): the order of its kernels' launches and library calls, without asserts and dels."""
    m = _CALL.search(source)
    if not m:
        return ""
    lines = [m.group(0).rstrip("\n")]
    for line in source[m.end():].split("\n"):
        if line.strip() and len(line) - len(line.lstrip()) <= len(m.group(1)):
            break
        if line.strip() and not _NOISE.match(line):
            lines.append(line)
    return "\n".join(lines) + "\n"


def summarize_inductor(sources, limit=INDUCTOR_CODE_BYTES):
    """What torch.compile runs, from Inductor's generated files: each Triton kernel from its @triton.jit on
    (no imports, no autotuning metadata), then call(); the library calls call() makes, once each in order;
    the code cut at `limit` bytes ("bytes": its size before). A file of another layout is kept as it is."""
    kernels, parts, calls = [], [], []
    for src in sources:
        found = 0
        for m in _TRITON_KERNEL.finditer(src):
            body = m.group(3)
            jit = body.find("@triton.jit")
            kernels.append(m.group(2))
            parts.append(body[jit:] if jit >= 0 else body)
            found += 1
        call = inductor_call_body(src)
        parts.append(call if call or found else src)
        for c in _LIBRARY_CALL.findall(call):
            calls += [] if c in calls else [c]
    code = "".join(p.strip("\n") + "\n\n" for p in parts if p.strip()).rstrip("\n") + "\n"
    return {"code": code[:limit], "kernels": kernels, "library_calls": calls, "bytes": len(code)}


def run_and_get_code_of(torch):
    """(torch._inductor.utils.run_and_get_code, None), or (None, why this PyTorch has none)."""
    try:
        from torch._inductor.utils import run_and_get_code
        return run_and_get_code, None
    except Exception as e:  # a private API: PyTorch 1.x has no torch._inductor, a later one may move it
        return None, "PyTorch %s has no torch._inductor.utils.run_and_get_code (%s)" % (torch.__version__, one_line(e))


def capture_inductor(torch, fn, args, run_and_get_code=None):
    """(fn(*args), inductor): the first call of torch.compile's module (it compiles then) under Inductor's
    run_and_get_code, and what it generated (summarize_inductor), or {"not_captured": why}. Where the
    capture itself fails, fn is called plainly: a module that does not compile fails there."""
    why = None
    if run_and_get_code is None:
        run_and_get_code, why = run_and_get_code_of(torch)
    if run_and_get_code is not None:
        try:
            result, sources = run_and_get_code(fn, *args)
            if not sources or not all(isinstance(x, str) for x in sources):
                raise ValueError("it returned no generated source")
            return result, summarize_inductor(sources)
        except Exception as e:
            why = "run_and_get_code failed: %s: %s" % (type(e).__name__, one_line(e))
    return fn(*args), {"not_captured": why}


def prepare_set(torch, spec, out, s, model, compiled, arg_sets, ctx):
    """What set s's timed calls run, made before the GPU is ours alone: eager's outputs on the first copy,
    torch.compile's compilation (its first call) and AOTInductor's package, each checked against eager."""
    tol = check_tol(spec)
    with torch.no_grad(), ctx():
        want = model(*arg_sets[0])  # eager's outputs on the first copy: what the others must match
    calls = {}
    if wanted(spec, out, "eager"):
        calls["eager"] = model
    if compiled is not None and wanted(spec, out, "compile"):
        first = compiled
        if out["inductor"] is None:  # the first timed set: the call that compiles also shows what Inductor made

            def first(*args):
                result, out["inductor"] = capture_inductor(torch, compiled, args)
                return result
        try:
            checked(torch, out, "compile", first, arg_sets[0], want, tol, ctx)
            calls["compile"] = compiled
        except ValueError as e:
            out["not_run"]["compile"] = "torch.compile's outputs do not match eager's: %s" % one_line(e)
        except Exception as e:  # Inductor could not compile this module: say so, keep eager
            out["not_run"]["compile"] = "torch.compile failed: %s: %s" % (type(e).__name__, one_line(e))
    if wanted(spec, out, "aoti"):
        path = os.path.join(spec.get("work_dir") or os.getcwd(), "aoti_set%d.pt2" % int(s["set"]))
        try:
            runner = aoti_package(torch, model, arg_sets[0], ctx, path)
            checked(torch, out, "aoti", runner, arg_sets[0], want, tol, ctx)
            calls["aoti"] = runner
        except ValueError as e:
            out["not_run"]["aoti"] = "AOTInductor's outputs do not match eager's: %s" % one_line(e)
        except AotiStepError as e:  # export or the ahead-of-time compilation failed: say which, keep the others
            out["not_run"]["aoti"] = "AOTInductor: %s" % one_line(e)
        except Exception as e:
            out["not_run"]["aoti"] = "AOTInductor: calling the loaded package failed: %s: %s" % (type(e).__name__, one_line(e))
    return calls


@contextlib.contextmanager
def gpu_alone(spec, n):
    """The GPU to ourselves for turn n (the tool's validate/turns.h; the names are common/turn_files.h's):
    ask with turn-N.ready, wait for turn-N.go, say turn-N.done. Without spec["turns"], no turns."""
    folder = spec.get("turns") or ""
    if folder:
        open(os.path.join(folder, "turn-%d.ready" % n), "x").close()
        while not os.path.exists(os.path.join(folder, "turn-%d.go" % n)):
            time.sleep(0.002)
    try:
        yield
    finally:
        if folder:
            open(os.path.join(folder, "turn-%d.done" % n), "x").close()


def time_set(torch, spec, out, s, calls, arg_sets, ctx, flush, turn):
    """One timed set's row: each prepared call timed, with the GPU ours alone."""
    warmup, trials = max(1, int(spec["warmup"])), max(1, int(spec["trials"]))
    row = {"set": s["set"], "label": s.get("label", ""), "eager_ms": None, "compile_ms": None, "aoti_ms": None}
    with gpu_alone(spec, turn):
        for kind, fn in calls.items():
            try:
                row["%s_ms" % kind] = time_calls(torch, fn, arg_sets, max(warmup, 3) if kind == "compile" else warmup,
                                                 trials, flush, ctx)
            except Exception as e:
                if kind == "eager":
                    raise
                out["not_run"][kind] = "%s failed while timed: %s: %s" % (LABELS[kind], type(e).__name__, one_line(e))
    return row


def run(spec, torch, out):
    device = torch.device(spec.get("device", "cuda"))
    out["device"] = torch.cuda.get_device_name(device) if device.type == "cuda" else str(device)
    kb = importer(spec)
    model, template = load_module(torch, kb, spec["task_dir"], device, out)
    ctx = set_precision(torch, spec)
    compiled = None
    if wanted(spec, out, "compile"):
        compiled = torch.compile(model)  # Inductor, default mode; compiles on its first (warm-up) calls
    flush = make_flush(torch, spec["l2_flush"], device)
    for turn, s in enumerate(spec["sets"]):
        n_args = check_template(torch, template, s["inputs"])
        copies = len(s["inputs"][0]["seeds"]) if s["inputs"] and "seeds" in s["inputs"][0] else 1
        arg_sets = [call_args(torch, template, draw_inputs(torch, kb, s["inputs"][:n_args], c, device)) for c in range(copies)]
        calls = prepare_set(torch, spec, out, s, model, compiled, arg_sets, ctx)
        out["sets"].append(time_set(torch, spec, out, s, calls, arg_sets, ctx, flush, turn))
        del arg_sets
        torch.cuda.empty_cache()


def aoti_missing(torch):
    """Why this PyTorch cannot build an AOTInductor package, or None."""
    if not hasattr(torch, "export"):
        return "PyTorch %s has no torch.export, so no AOTInductor (needs PyTorch 2.6 or later)" % torch.__version__
    try:
        import torch._inductor as inductor
    except Exception as e:
        return "PyTorch %s cannot import torch._inductor (%s)" % (torch.__version__, one_line(e))
    if not (hasattr(inductor, "aoti_compile_and_package") and hasattr(inductor, "aoti_load_package")):
        return ("PyTorch %s has no torch._inductor.aoti_compile_and_package / aoti_load_package (needs PyTorch 2.6 or later)"
                % torch.__version__)
    return None


def main():
    with open(sys.argv[1], encoding="utf-8") as f:
        spec = json.load(f)
    out = {"eager_ms": None, "compile_ms": None, "aoti_ms": None, "sets": [], "torch_version": None, "device": None,
           "precision": spec.get("precision", "pytorch"), "module": None, "not_run": {}, "checks": {},
           "inductor": None}

    def not_run(reason, kinds=KINDS):
        for k in kinds:
            out["not_run"].setdefault(k, reason)

    for k in KINDS:
        if k not in spec.get("which", KINDS):
            not_run("not asked for", [k])
    try:
        import torch
    except Exception as e:
        not_run("no PyTorch in this Python (%s)" % one_line(e))
        return emit(out)
    out["torch_version"] = torch.__version__
    if not hasattr(torch, "compile"):
        not_run("PyTorch %s has no torch.compile (needs PyTorch 2)" % torch.__version__, ["compile"])
    if "aoti" not in out["not_run"]:
        why = aoti_missing(torch)
        if why:
            not_run(why, ["aoti"])
    if not torch.cuda.is_available():
        not_run("no CUDA device for PyTorch %s%s" % (torch.__version__, "" if torch.version.cuda else " (a CPU-only build)"))
        return emit(out)
    try:
        run(spec, torch, out)
    except LookupError as e:
        not_run(one_line(e.args[0] if e.args else e))
    except Exception as e:
        not_run("the module could not be run: %s: %s" % (type(e).__name__, one_line(e)))
    if out["sets"]:
        for k in KINDS:
            out["%s_ms" % k] = out["sets"][0]["%s_ms" % k]
    for k in KINDS:  # a baseline without a time has a reason, never a silent gap
        if out["%s_ms" % k] is None:
            not_run("not measured", [k])
    return emit(out)


if __name__ == "__main__":
    sys.exit(main())
