"""The model folder's plain parts that load_model and compare_model share: its plan.json read and
checked, random inputs of the plan's shapes, the model's device, and how far two outputs are apart by
the judge's rule."""
import math
import os
import re

import torch

from .files import FileRefused, load_json_file
from .kernelbench.common import DTYPES, MAX_DIMS, MAX_TENSORS
from .kernelbench.tolerance import allclose_t
from .model_export import PLAN_FORMAT
from .op import _torch_dtype

PLAN_FILE = "plan.json"


def _plan_reason(spec):
    st, why = spec.get("status", ""), spec.get("reason", "")
    if st == "below_threshold":
        return "below the plan's threshold (share %s): stays in PyTorch" % _pct(spec.get("share"))
    if st == "view":
        return "views only (no compute)"
    if st in ("refused", "failed"):
        return "%s at export: %s" % (st, why or "no reason given")
    return "plan status %r%s" % (st, (": " + why) if why else "")


def _pct(x):
    return "?" if x is None else "%.1f%%" % (100.0 * float(x))


class PlanError(ValueError):
    """A plan.json that kernelevo does not read: one line naming the file, the field and why."""


# The C++ reader's rules (tool/model/plan.cpp load_plan / read_region, the one description of a region is
# model_plan.md): the same plan is refused by both, with the same words.
_STATUSES = ("task", "below_threshold", "refused", "failed", "view", "repeat")
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# What load_model allocates from the plan before it can check the fingerprint (the trace needs the inputs):
# at most MAX_DIMS dimensions and MAX_TENSORS inputs as a task (tool/task), at most MAX_INPUT_BYTES in all.
MAX_INPUT_BYTES = 4 << 30


def _fail(path, where, message):
    raise PlanError("%s: %s%s" % (path, (where + ": ") if where else "", message))


def _need(path, where, obj, key, kind):
    names = {str: "a string", list: "an array", dict: "an object", float: "a number"}
    if key not in obj:
        _fail(path, where, 'missing key "%s"' % key)
    v = obj[key]
    ok = (isinstance(v, (int, float)) and not isinstance(v, bool)) if kind is float else isinstance(v, kind)
    if not ok:
        _fail(path, where, '"%s" must be %s' % (key, names[kind]))
    return v


def _region_task(path, root, where, task):
    """The region's task folder, which must lie inside the model folder (symbolic links resolved), with task.json."""
    if not task:
        _fail(path, where, '"task" is empty (a region with status "task" names its task folder)')
    if os.path.isabs(task):
        _fail(path, where, 'task "%s" is an absolute path; it must be a folder inside %s' % (task, root))
    real_root = os.path.realpath(root)
    rel = os.path.relpath(os.path.realpath(os.path.join(root, task)), real_root)
    if rel == "." or rel == ".." or rel.startswith(".." + os.sep):
        _fail(path, where, 'task "%s" leaves the model folder %s' % (task, root))
    folder = os.path.join(root, task)
    if not os.path.isdir(folder):
        _fail(path, where, "task folder %s does not exist (was the model folder copied whole?)" % folder)
    if not os.path.isfile(os.path.join(folder, "task.json")):
        _fail(path, where, "task folder %s has no task.json" % folder)


def _check_region(path, root, r, i):
    where = "regions[%d]" % i
    if not isinstance(r, dict):
        _fail(path, where, "must be an object")
    where += " (%s)" % _need(path, where, r, "name", str)
    task_name = _need(path, where, r, "task_name", str)
    if not _IDENTIFIER.fullmatch(task_name):
        _fail(path, where, 'task_name "%s" is not an identifier (letters, digits and _)' % task_name)
    status = _need(path, where, r, "status", str)
    share = _need(path, where, r, "share", float)
    if not math.isfinite(share) or share < 0 or share > 1.001:  # a fraction of the model's time
        _fail(path, where, '"share" must be a number from 0 to 1 (a fraction of the model\'s time)')
    if status not in _STATUSES:
        _fail(path, where, 'unknown status "%s" (expected task, below_threshold, refused, failed, view or repeat)'
              % status)
    if status == "task":
        _region_task(path, root, where, _need(path, where, r, "task", str))
        if "share_with_repeats" in r:
            w = _need(path, where, r, "share_with_repeats", float)
            if not math.isfinite(w) or w < share:
                _fail(path, where, '"share_with_repeats" must be a number >= "share"')
            if w > 1.001:
                _fail(path, where, '"share_with_repeats" must be at most 1 (a fraction of the model\'s time)')
    if status == "repeat":
        _need(path, where, r, "same_as", str)
    # What load_model reads besides (model_plan.md): the region's node range and its weights' names.
    nodes = r.get("nodes")
    if nodes is not None and not (isinstance(nodes, list) and len(nodes) == 2 and all(
            isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in nodes) and nodes[0] <= nodes[1]):
        _fail(path, where, '"nodes" must be [start, end], two whole numbers with 0 <= start <= end')
    weights = r.get("weights", [])
    if not (isinstance(weights, list) and all(isinstance(w, str) for w in weights)):
        _fail(path, where, '"weights" must be an array of parameter names')
    return r["name"], task_name


def _check_inputs(path, plan):
    """The plan's inputs: what load_model draws random tensors of before it traces the model."""
    inputs = _need(path, "", plan, "inputs", list)
    if len(inputs) > MAX_TENSORS:
        _fail(path, "inputs", "%d inputs; a model folder's model takes at most %d" % (len(inputs), MAX_TENSORS))
    total = 0
    for i, spec in enumerate(inputs):
        where = "inputs[%d]" % i
        if not isinstance(spec, dict):
            _fail(path, where, "must be an object")
        dtype, shape = _need(path, where, spec, "dtype", str), _need(path, where, spec, "shape", list)
        if dtype not in {n for n, _ in DTYPES.values()}:
            _fail(path, where, 'unknown dtype "%s"' % dtype)
        if len(shape) > MAX_DIMS or not all(isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in shape):
            _fail(path, where, '"shape" must be at most %d whole numbers >= 0, not %s' % (MAX_DIMS, str(shape)[:80]))
        low, high = spec.get("low", 0), spec.get("high", 2)
        if not all(isinstance(v, int) and not isinstance(v, bool) for v in (low, high)) or low >= high:
            _fail(path, where, '"low" and "high" must be whole numbers, low < high')
        numel = 1
        for d in shape:
            numel *= d
        total += numel * torch.empty((), dtype=_torch_dtype(dtype)).element_size()
        if total > MAX_INPUT_BYTES:
            _fail(path, where, "shape %s: the plan's inputs would take over %d GiB (at most %d GiB are drawn to trace "
                  "the model)" % (shape, total >> 30, MAX_INPUT_BYTES >> 30))


def check_plan(plan, root, path):
    """The plan as both readers take it (tool/model/plan.cpp's rules, then the inputs and the fingerprint load_model
    uses); a PlanError naming plan.json and the field otherwise. Nothing is read outside the model folder."""
    if not isinstance(plan, dict):
        _fail(path, "", "must be a JSON object")
    fmt = _need(path, "", plan, "format", str)
    if fmt != PLAN_FORMAT:
        _fail(path, "", "format %r, expected %r (a model folder of kernelevo.export_model)" % (fmt, PLAN_FORMAT))
    _need(path, "", plan, "model", str)
    names, task_names = set(), set()
    for i, r in enumerate(_need(path, "", plan, "regions", list)):
        name, task_name = _check_region(path, root, r, i)
        if name in names:
            _fail(path, "regions[%d]" % i, 'duplicate name "%s"' % name)
        if task_name in task_names:
            _fail(path, "regions[%d]" % i, 'duplicate task_name "%s"' % task_name)
        names.add(name)
        task_names.add(task_name)
    if "threshold" in plan and not 0 <= _need(path, "", plan, "threshold", float) <= 1:
        _fail(path, "", '"threshold" must be a share of the model\'s time, 0 to 1')
    fp = _need(path, "", plan, "fingerprint", str)
    if not re.fullmatch(r"[0-9a-f]{64}", fp):
        _fail(path, "", '"fingerprint" must be a sha256 in hex (64 digits 0-9a-f)')
    _check_inputs(path, plan)


def read_plan(out_dir):
    """DIR/plan.json, refused with a one-line reason (PlanError, a ValueError, naming the file and the field)
    unless it is a kernelevo-model-plan/1 file both readers take (check_plan): read before anything else is."""
    path = out_dir if out_dir.endswith(".json") else os.path.join(out_dir, PLAN_FILE)
    if not os.path.lexists(path):
        raise FileNotFoundError("%s: no such file (a model folder is written by kernelevo.export_model)" % path)
    try:
        plan = load_json_file(path, "a model plan (plan.json)")
    except FileRefused as e:
        raise PlanError(str(e)) from None
    check_plan(plan, os.path.dirname(os.path.abspath(path)), path)
    return plan


def plan_inputs(plan, device, seed=0):
    """Random inputs of the plan's shapes and dtypes on `device` (a generator of their own: the user's
    RNG state is untouched). Floats: standard normal; bools: fair coins; integers: uniform in
    [low, high) of the input's spec where it has them, else [0, 2)."""
    g = torch.Generator().manual_seed(seed)
    out = []
    for spec in plan["inputs"]:
        try:
            dtype, shape = _torch_dtype(spec["dtype"]), [int(d) for d in spec["shape"]]
        except (KeyError, TypeError, ValueError):
            raise ValueError("plan input %s: dtype %r / shape %r is not one a task can have" % (
                spec.get("name"), spec.get("dtype"), spec.get("shape"))) from None
        if dtype.is_floating_point:
            x = torch.randn(shape, generator=g).to(dtype)
        elif dtype == torch.bool:
            x = torch.randint(0, 2, shape, generator=g).bool()
        else:
            x = torch.randint(int(spec.get("low", 0)), int(spec.get("high", 2)), shape, generator=g).to(dtype)
        out.append(x.to(device))
    return out


def model_device(model):
    for t in list(model.parameters()) + list(model.buffers()):
        return t.device
    return torch.device("cpu")


def _flat(outs):
    if isinstance(outs, torch.Tensor):
        return [outs]
    if isinstance(outs, dict):
        return [t for v in outs.values() for t in _flat(v)]
    if isinstance(outs, (tuple, list)):
        return [t for v in outs for t in _flat(v)]
    return []


def needed_tolerance(got, want):
    """The smallest t with which `got` passes the judge's rule against `want` at atol = rtol = t
    (tool/device/tolerance.h, through the importer's allclose_t: the one implementation in Python);
    integer and bool outputs compare exactly (0 or inf)."""
    got, want = _flat(got), _flat(want)
    if len(got) != len(want):
        return math.inf
    worst = 0.0
    for a, b in zip(got, want):
        if a.shape != b.shape:
            return math.inf
        if not b.is_floating_point():
            worst = max(worst, 0.0 if torch.equal(a.cpu(), b.cpu()) else math.inf)
        else:
            worst = max(worst, allclose_t(a.detach().float().cpu(), b.detach().double().cpu())[0])
    return worst
