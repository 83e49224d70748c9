"""export_task(): a live PyTorch module or function + example inputs -> a kernelevo task directory,
through the KernelBench importer's own code (kernelevo.kernelbench)."""
import copy
import inspect
import json
import os
import re
import shutil
import types

import torch
from torch import nn

from .kernelbench.common import Refused, identifier, task_name_problem
from .kernelbench.task_import import _import_one

# Next to task.json: which task inputs the caller passes and which are the module's weights
# (load_op() reads it; the task format itself does not distinguish them).
SIDECAR = "pytorch.json"
# The importer's copy of the generic reference, the same file name as `kernelevo import kernelbench`
# uses, so that every task of a folder shares one reference build.
REFERENCE_NAME = "kernelbench_reference.cpp"


def _read_text(path):
    with open(path, encoding="utf-8") as f:
        return f.read()


def _read_bytes(path):
    with open(path, "rb") as f:
        return f.read()


def _load_json(path):
    with open(path, encoding="utf-8") as f:
        return json.load(f)


class ExportError(RuntimeError):
    """The module cannot be exported faithfully; the message says why (the importer's reason)."""


def _kernelbench_dir():
    """The folder of the importer's data files (jit_reference.cpp, precision.h):
    $KERNELEVO_KERNELBENCH_DIR, the installed share/kernelevo/kernelbench (this package is installed as
    share/kernelevo/python/kernelevo), the copy `pip install` put in the package (kernelevo/_share, made
    from the source tree by setup.py), or the source tree's."""
    here = os.path.dirname(os.path.abspath(__file__))
    candidates = [os.environ.get("KERNELEVO_KERNELBENCH_DIR", ""),
                  os.path.join(here, "..", "..", "kernelbench"),
                  os.path.join(here, "_share", "kernelbench"),
                  os.path.join(here, "..", "..", "tool", "kernelbench")]
    for c in candidates:
        if c and os.path.isfile(os.path.join(c, "jit_reference.cpp")):
            return os.path.abspath(c)
    raise ExportError("the KernelBench importer's files (jit_reference.cpp) were not found next to this package; "
                      "set KERNELEVO_KERNELBENCH_DIR to kernelevo's share/kernelevo/kernelbench")


class _Function(nn.Module):
    """A plain function as a module without weights (the importer traces modules). The function is
    the instance's forward, so that the task's inputs are named after its parameters; a module's
    method passed as a function is not a submodule: its weights become constants of the trace."""

    def __init__(self, fn):
        super().__init__()
        self.forward = fn


def _source_of(obj):
    """(file, text) of the user's code: the file names the trace's warnings from their code
    (data-dependent control flow), the text is shown to the LLM as problem.py."""
    target = obj if inspect.isfunction(obj) or inspect.ismethod(obj) else type(obj)
    try:
        path = inspect.getsourcefile(target) or ""
    except TypeError:
        path = ""
    try:
        text = inspect.getsource(target)
    except (OSError, TypeError):
        text = "# (source not available: %r)\n" % (target,)
    text = getattr(obj, "kevo_source", None) or text  # a model's region: export_model says what to show
    return os.path.abspath(path) if path else "<kernelevo.export_task>", text


def _draw(x, mode):
    """A tensor like x drawn through torch's generators (the importer records rand/randn/randint as
    the task's distribution), or x itself (stored as a file) for mode "examples" and dtypes without
    a stated distribution."""
    if mode == "examples" or x.numel() == 0:
        return x.detach().clone()
    shape = tuple(x.shape)
    if x.dtype == torch.bool:
        return torch.randint(0, 2, shape, dtype=torch.bool)
    if x.is_floating_point():
        lo, hi = float(x.min()), float(x.max())
        if lo >= 0 and hi <= 1:
            return torch.rand(shape, dtype=x.dtype)
        return torch.randn(shape, dtype=x.dtype)
    lo, hi = int(x.min()), int(x.max())
    return torch.randint(lo, hi + 1, shape, dtype=x.dtype)


def _round(v):
    return float("%.3g" % v)


def _randn_stats(x):
    """mean and std for a randn input, from the example: the standard values unless the example is
    clearly elsewhere (a mean beyond a tenth of its spread, a spread off by more than 10%)."""
    xf = x.detach().double()
    mean, std = float(xf.mean()), float(xf.std()) if x.numel() > 1 else 1.0
    if not std > 0:
        std = 1.0
    return (0.0 if abs(mean) < 0.1 * std else _round(mean)), (1.0 if abs(std - 1) <= 0.1 else _round(std))


class _QuietPhases:
    """The importer's Phases without its progress lines (they are the CLI driver's protocol)."""

    def __init__(self):
        self.seconds = {}

    def done(self, phase):
        pass


def precision_table():
    """The precision policies, name -> (cudnn_tf32, matmul_tf32) the timed reference runs with, in the
    table's order (the first is the default): KEVO_PRECISION_LIST of tool/task/precision.h (installed
    beside the importer), the one table."""
    here = _kernelbench_dir()
    for path in (os.path.join(here, "precision.h"), os.path.join(here, "..", "task", "precision.h")):
        if os.path.isfile(path):
            rows = re.findall(r'X\((\w+),\s*"(\w+)",\s*([01]),\s*([01]),', _read_text(path))
            if rows:
                return {n: (c == "1", m == "1") for _, n, c, m in rows}
    raise ExportError("the precision table (precision.h) was not found beside the importer in " + here)


def live_precision():
    """The precision policy this process runs PyTorch under: "pytorch" with the TF32 flags it has set
    (torch.backends.cudnn.allow_tf32; torch.backends.cuda.matmul.allow_tf32, on too when
    torch.get_float32_matmul_precision() is "high" or "medium"), as task.json's "precision"."""
    cudnn = bool(torch.backends.cudnn.allow_tf32)
    matmul = bool(torch.backends.cuda.matmul.allow_tf32)
    get = getattr(torch, "get_float32_matmul_precision", None)
    if get is not None:
        matmul = matmul or get() in ("high", "medium")
    return {"policy": "pytorch", "cudnn_tf32": cudnn, "matmul_tf32": matmul}


def _precision(spec):
    """The importer's --precision object for a policy name or {"policy", "cudnn_tf32", "matmul_tf32"}:
    its flags and its task.json form (None for the default, the name where the flags are the table's)."""
    table = precision_table()
    spec = {"policy": spec} if isinstance(spec, str) else dict(spec)
    name = spec.get("policy")
    if name not in table:
        raise ValueError("precision: unknown precision policy %r (expected one of: %s)" % (name, ", ".join(table)))
    cudnn, matmul = bool(spec.get("cudnn_tf32", table[name][0])), bool(spec.get("matmul_tf32", table[name][1]))
    if name != "pytorch" and (cudnn, matmul) != table[name]:
        raise ValueError("precision: only the pytorch policy records the user's TF32 flags; %s fixes them" % name)
    form = None if (name, cudnn, matmul) == ("pytorch",) + table["pytorch"] else (
        name if (cudnn, matmul) == table[name] else {"policy": name, "cudnn_tf32": cudnn, "matmul_tf32": matmul})
    return {"task": form, "policy": name, "cudnn_tf32": cudnn, "matmul_tf32": matmul}


def export_task(fn_or_module, example_inputs, out_dir, name=None, tolerance=None, inputs="random", device=None,
                quiet=False, precision=None, overwrite=False):
    """Writes the task OUT_DIR/NAME/ for `kernelevo validate` / `kernelevo search` and returns the path
    of its task.json.

    fn_or_module: an nn.Module (its CURRENT weights and buffers are exported as they are, not
        re-initialised; it is deep-copied, never modified; it is traced in the mode it is in: call
        .eval() first for inference, BatchNorm/Dropout in training mode are refused) or a function of
        tensors (traced as is).
    example_inputs: a tensor or a tuple of the forward's arguments. Tensors give the task's shapes and
        dtypes; plain numbers are fixed as constants of the trace.
    inputs: "random" (default): the task draws inputs of the examples' shapes and dtypes: floats
        uniform in [0, 1) when every example value lies in [0, 1], else normal with the examples'
        mean and spread (standard unless clearly not); integers uniform over the examples' range;
        bools uniform. "examples": the example tensors themselves, stored as files.
    tolerance: None (the importer's policy: measured from the model's fp32-vs-fp64 error) or a dict
        merged into task.json's "tolerance" (e.g. {"atol": 1e-3, "rtol": 1e-3}).
    device: where the model is traced and checked ("cuda" when this PyTorch sees a GPU, else "cpu",
        as `kernelevo import kernelbench` chooses).
    precision: the task's precision policy (task.json "precision"): None (default) reads it from this
        process as the user's code has set it (live_precision(): "pytorch" with the TF32 flags of
        torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32 and
        torch.get_float32_matmul_precision()); or "pytorch", "strict", "tf32", "bf16" (the names of
        tool/task/precision.h), or {"policy": "pytorch", "matmul_tf32": True, ...}. The reference is
        timed under it; correctness is judged against strict fp32 with a tolerance that admits the
        policy's own error on this problem (measured here).
    overwrite: OUT_DIR/NAME that exists already (a task exported before, its kernels validated for it)
        is refused (FileExistsError) unless overwrite=True.

    This runs the KernelBench importer's own functions (_import_one: trace to model.pt, weights as
    file inputs, graph.py, tolerance, checks for data-dependent control flow, randomness and
    in-place inputs) on the live module, in this Python process and without a sandbox: it is your
    own code, which `kernelevo import kernelbench` would sandbox only because problem files are
    someone else's. Calling the importer directly (instead of writing a problem file that rebuilds
    the module) keeps the weights exactly as they are (no pickling of arbitrary module classes, no
    re-initialisation with seed 42), and the task is what the importer would write for it.
    The importer's C++ self-check (kernelevo-refcheck) is not run here; `kernelevo validate`
    checks the reference it builds against these files. Raises ExportError with the reason.
    """
    chosen = _precision(live_precision() if precision is None else precision)
    if inputs not in ("random", "examples"):
        raise ValueError("inputs: 'random' or 'examples', not %r" % (inputs,))
    examples = list(example_inputs) if isinstance(example_inputs, (tuple, list)) else [example_inputs]
    if isinstance(fn_or_module, nn.Module):
        try:
            model = copy.deepcopy(fn_or_module)
        except Exception as e:
            raise ExportError("cannot copy the module (%s: %s); export a copy you made" % (type(e).__name__, e))
        user = fn_or_module
    elif callable(fn_or_module):
        model, user = _Function(fn_or_module), fn_or_module
    else:
        raise TypeError("fn_or_module: an nn.Module or a function, not %s" % type(fn_or_module).__name__)
    path, src = _source_of(user)
    name = name or identifier(getattr(user, "__name__", None) or type(user).__name__.lower(), set())
    why = task_name_problem(name)  # the CLI's rule, checked before anything is written
    if why:
        raise ValueError("name: %s" % why)
    target = os.path.join(os.path.abspath(out_dir), name)
    if os.path.exists(target) and not overwrite:
        raise FileExistsError("%s exists already (a task exported before): pass overwrite=True to replace it, or "
                              "another name=" % target)
    _refuse_training_mode(model, name)
    device = device or ("cuda" if torch.cuda.is_available() else "cpu")
    model = model.to(torch.device(device))

    # The importer's problem module, made here: Model() is the live module, get_inputs() draws
    # like the examples (through torch's generators, which the importer records).
    problem = types.ModuleType("kernelevo_export")
    problem.__file__ = path
    problem.Model = lambda: model
    problem.get_init_inputs = lambda: []
    problem.get_inputs = lambda: [_draw(x, inputs) if isinstance(x, torch.Tensor) else x for x in examples]

    out_dir = os.path.abspath(out_dir)
    os.makedirs(out_dir, exist_ok=True)
    reference = os.path.join(out_dir, REFERENCE_NAME)
    text = _read_text(os.path.join(_kernelbench_dir(), "jit_reference.cpp"))
    if not os.path.exists(reference) or _read_text(reference) != text:
        with open(reference + ".tmp", "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(reference + ".tmp", reference)
    args = types.SimpleNamespace(out=out_dir, device=device, device_kind="cuda" if device.startswith("cuda") else "cpu",
                                 refcheck="", library="", max_numel=0, timeout=900, scratch="", precision=chosen)
    problem_text = _problem_text(src, examples, inputs)
    saved = (torch.is_grad_enabled(), torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32)
    # As the importer's main(): no autograd, strict fp32 (comparisons are judged against it).
    torch.set_grad_enabled(False)
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = False
    try:
        result = _import_one(path, args, reference, problem_text, problem, {}, _QuietPhases(), name=name)
    except Refused as e:
        raise ExportError("%s cannot be exported: %s" % (name, e)) from None
    finally:
        shutil.rmtree(os.path.join(out_dir, name + ".tmp"), ignore_errors=True)
        torch.set_grad_enabled(saved[0])
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = saved[1], saved[2]
    if result.get("status") != "ok":
        raise ExportError("%s: %s" % (name, result.get("reason", "import failed")))
    task_dir = os.path.join(out_dir, name)
    _finish(task_dir, result, examples, inputs, tolerance, path)
    _save_program(model, examples, device, task_dir)
    task_json = os.path.join(task_dir, "task.json")
    if not quiet:
        print("kernelevo: wrote %s (%d input(s), %d weight tensor(s), %d output(s)); next:\n"
              "  kernelevo validate --task %s --kernel YOUR_KERNEL.cu\n"
              "  kernelevo search --task %s --out %s --model MODEL" % (
                  task_json, result["inputs"], result["parameters"], result["outputs"], task_json, task_json,
                  os.path.join(out_dir, "kernels")))
    return task_json


def _refuse_training_mode(model, name):
    """BatchNorm and Dropout in training mode give another result per call (batch statistics, updated
    running statistics; random masks): the user's module is for inference once .eval() is called."""
    for path, m in model.named_modules():
        what = None
        if isinstance(m, nn.modules.batchnorm._BatchNorm) and m.training:
            what = "%s is in training mode: it normalizes with each batch's statistics and updates its running ones" % (
                type(m).__name__)
        elif isinstance(m, nn.modules.dropout._DropoutNd) and m.training and m.p > 0:
            what = "%s (p=%g) is in training mode: its output is random" % (type(m).__name__, m.p)
        if what:
            raise ExportError("%s cannot be exported: %s%s; call model.eval() before export_task" % (
                name, ("layer '%s': " % path) if path else "", what))


def _save_program(model, examples, device, task_dir):
    """model.pt2: torch.export of the live module, which kernelevo's PyTorch baselines (tool/baseline:
    eager and torch.compile) run; pytorch.json names it ("module_pt2"), or says why there is none."""
    side_path = os.path.join(task_dir, SIDECAR)
    side = _load_json(side_path)
    side["module_pt2"], side["module_pt2_why"] = None, None
    if not hasattr(torch, "export"):
        side["module_pt2_why"] = ("exported with PyTorch %s, which has no torch.export: export again with PyTorch 2 for "
                                  "the eager and torch.compile baselines" % torch.__version__)
    else:
        args = tuple(x.to(device) if isinstance(x, torch.Tensor) else x for x in examples)
        try:
            torch.export.save(torch.export.export(model, args), os.path.join(task_dir, "model.pt2"))
            side["module_pt2"] = "model.pt2"
        except Exception as e:
            side["module_pt2_why"] = "torch.export could not export the module: %s: %s" % (type(e).__name__, " ".join(str(e).split())[:300])
    with open(side_path + ".tmp", "w", encoding="utf-8") as f:
        json.dump(side, f, indent=2)
        f.write("\n")
    os.replace(side_path + ".tmp", side_path)


def _plain(x):
    """A constant of the trace as JSON (load_op compares the caller's value with it)."""
    return x if isinstance(x, (int, float, bool, str, type(None))) else repr(x)


def _problem_text(src, examples, mode):
    lines = ["# The PyTorch code exported by kernelevo.export_task(): the module's own weights are the task's",
             "# file inputs (graph.py lists them in order). Example inputs (%s):" % (
                 "stored as files" if mode == "examples" else "the task draws inputs of these shapes and dtypes")]
    for k, x in enumerate(examples):
        if isinstance(x, torch.Tensor):
            lines.append("#   arg %d: %s%s" % (k, str(x.dtype).replace("torch.", ""), list(x.shape)))
        else:
            lines.append("#   arg %d: %r (a constant of the trace)" % (k, x))
    return "\n".join(lines) + "\n\n" + src.rstrip() + "\n"


def _finish(task_dir, result, examples, mode, tolerance, path):
    """What differs from a KernelBench import: the description, the titles, randn statistics, the
    tolerance asked for, and the sidecar naming the caller's inputs and the weights."""
    task_json = os.path.join(task_dir, "task.json")
    with open(task_json, encoding="utf-8") as f:
        task = json.load(f)
    n_in = result["inputs"]
    task["description"] = "PyTorch %s exported by kernelevo.export_task (torch %s)" % (
        os.path.basename(path), torch.__version__)
    task["reference"]["show"][0]["title"] = ("The PyTorch code (exported from Python; the weights are the module's "
                                             "own, as file inputs)")
    tensors = [x for x in examples if isinstance(x, torch.Tensor)]
    for spec, x in zip(task["inputs"][:n_in], tensors):
        if spec["init"].get("kind") == "randn":
            spec["init"]["mean"], spec["init"]["std"] = _randn_stats(x)
    if tolerance:
        task["tolerance"].update(tolerance)
    with open(task_json + ".tmp", "w", encoding="utf-8") as f:
        json.dump(task, f, indent=2)
        f.write("\n")
    os.replace(task_json + ".tmp", task_json)
    graph = os.path.join(task_dir, "graph.py")
    text = _read_text(graph)
    head, _, rest = text.partition("\n")
    head = head.replace("# KernelBench problem %s:" % os.path.basename(path), "# PyTorch %s (kernelevo.export_task):"
                        % os.path.basename(path), 1)
    with open(graph, "w", encoding="utf-8") as f:
        f.write(head + "\n" + rest)
    names = iter(s["name"] for s in task["inputs"][:n_in])
    side = {"args": [{"tensor": next(names)} if isinstance(x, torch.Tensor) else {"constant": _plain(x)} for x in examples],
            "inputs": [s["name"] for s in task["inputs"][:n_in]],
            "weights": [s["name"] for s in task["inputs"][n_in:]],
            "outputs": [o["name"] for o in task["outputs"]],
            "input_mode": mode, "torch": torch.__version__}
    with open(os.path.join(task_dir, SIDECAR), "w", encoding="utf-8") as f:
        json.dump(side, f, indent=2)
        f.write("\n")
