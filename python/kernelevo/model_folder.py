"""The model folder's plain parts that load_model and compare_model share: its plan.json read and
checked, random inputs of the plan's shapes, the model's device, and how far two outputs are apart by
the judge's rule."""
import math
import os

import torch

from .kernelbench.tolerance import allclose_t
from .model_export import PLAN_FORMAT
from .op import _torch_dtype
from .torch_task import _load_json

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


def read_plan(out_dir):
    """DIR/plan.json, refused with a one-line reason unless it is a kernelevo-model-plan/1 file."""
    path = out_dir if out_dir.endswith(".json") else os.path.join(out_dir, PLAN_FILE)
    if not os.path.isfile(path):
        raise FileNotFoundError("%s: no such file (a model folder is written by kernelevo.export_model)" % path)
    plan = _load_json(path)
    if not isinstance(plan, dict) or plan.get("format") != PLAN_FORMAT:
        got = plan.get("format") if isinstance(plan, dict) else type(plan).__name__
        raise ValueError("%s: format %r, expected %r (a model folder of kernelevo.export_model)" % (path, got, PLAN_FORMAT))
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
