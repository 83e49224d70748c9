"""The task's tolerance: the reference's own error (fp32 against fp64), and the precision policy's
own error against strict fp32 (the tolerance widened to admit it)."""
import math

import torch

from .common import one_line
from .trace import _chunks, flat_outputs


# ---- the tolerance: the reference's own error (fp32 vs fp64) ------------------------------------------

TOL_FLOOR, TOL_CEIL = 1e-4, 1e-2  # KernelBench checks fp32 at 1e-2: never looser


def allclose_t(a, b):
    """The smallest t with which a passes the judge's rule against b (the fp64 one) at atol = rtol = t
    (tool/device/tolerance.h, s the RMS of b's finite elements): per element |a - b| <= t * min(1, s)
    + t * |b| (t * (1 + |b|) where s is 0), and rms(a - b) <= t * s; and max |a - b|."""
    sum_sq, finite = 0.0, 0
    for _, y in _chunks(a, b):
        f = torch.isfinite(y)
        sum_sq, finite = sum_sq + float((y[f] * y[f]).sum()), finite + int(f.sum())
    s = math.sqrt(sum_sq / finite) if finite else 0.0
    floor = min(1.0, s) if 0 < s < math.inf else 1.0
    worst = biggest = sum_d2 = 0.0
    for x, y in _chunks(a, b):
        d = (x.double() - y).abs()
        d = torch.nan_to_num(d.masked_fill(torch.isnan(x) & torch.isnan(y), 0), nan=math.inf)
        if d.numel():
            biggest = max(biggest, float(d.max()))
            worst = max(worst, float((d / (floor + y.abs())).max()))
            sum_d2 += float((d[torch.isfinite(d)] ** 2).sum())
    if 0 < s < math.inf and a.numel():
        worst = max(worst, math.sqrt(sum_d2 / a.numel()) / s)
    return worst, biggest


def one_digit_up(x):
    if x <= 0:
        return 0.0
    e = math.floor(math.log10(x))
    m = math.ceil(round(x / 10 ** e, 9))
    return float("%de%d" % (m, e)) if m < 10 else float("1e%d" % (e + 1))


def tolerance_from(outputs, measured):
    """The task's tolerance: (atol, rtol, policy), atol None for exact outputs."""
    kinds = {o.dtype for o in outputs}
    if all(not o.is_floating_point() for o in outputs):
        return None, None, "integer/bool outputs: compared exactly"
    if kinds & {torch.float16, torch.bfloat16}:
        return 1e-2, 1e-2, "fp16/bf16 outputs: atol = rtol = 1e-2 (KernelBench's own check)"
    if measured is None:
        return TOL_FLOOR, TOL_FLOOR, ("fp32 outputs, fp64 run unavailable: atol = rtol = 1e-4 (strict fp32, TF32 "
                                      "off; KernelBench checks at 1e-2)")
    t = min(max(one_digit_up(measured * 10), TOL_FLOOR), TOL_CEIL)
    return t, t, ("fp32 outputs, strict fp32 (TF32 off): 10x the reference's own error against fp64 (t %.2g by the "
                  "judge's rule, relative to each output's scale), rounded up to one digit, within [1e-4, 1e-2] "
                  "(KernelBench checks at 1e-2)" % measured)


# The precision policy (task.json "precision", KEVO_PRECISION_LIST in tool/task/precision.h): kernelevo
# passes it with its TF32 flags as --precision; the default is PyTorch's own.
DEFAULT_PRECISION = {"task": None, "policy": "pytorch", "cudnn_tf32": True, "matmul_tf32": False}
POLICY_MARGIN = 3  # a kernel computing as the policy does may differ from strict fp32 by this times its error


def policy_error(model, call_args, strict, precision):
    """The policy's own error on this problem: the model as the timed reference runs it (the policy's
    TF32 flags; bf16: the model and inputs in bfloat16) against the strict fp32 outputs, in the judge's
    terms (allclose_t). None where it cannot be measured."""
    if not all(o.dtype == torch.float32 for o in strict):
        return None
    saved = (torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32)
    try:
        torch.backends.cudnn.allow_tf32 = bool(precision["cudnn_tf32"])
        torch.backends.cuda.matmul.allow_tf32 = bool(precision["matmul_tf32"])
        with torch.no_grad():
            if precision["policy"] == "bf16":
                import copy
                low = copy.deepcopy(model).to(torch.bfloat16)
                out = flat_outputs(low(*[x.to(torch.bfloat16) if isinstance(x, torch.Tensor) and x.is_floating_point() else x
                                         for x in call_args]))
                del low
            else:
                out = flat_outputs(model(*call_args))
        if len(out) != len(strict):
            return None
        return max([allclose_t(a.float(), b.double())[0] for a, b in zip(out, strict)] + [0.0])
    except Exception:
        return None
    finally:
        torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32 = saved


def with_policy(atol, rtol, text, policy_err, precision):
    """The tolerance widened to admit the policy's own error (POLICY_MARGIN times it, one digit up),
    never narrowed; the text says so."""
    name = precision["policy"]
    if atol is None or not policy_err:
        return atol, rtol, text + ("; precision %s: its own error against strict fp32 is %s" % (
            name, "0 here" if policy_err == 0 else "not measured")) if atol is not None else text
    t = min(one_digit_up(POLICY_MARGIN * policy_err), 0.5)
    if t <= max(atol, rtol):
        return atol, rtol, text + "; precision %s: its own error against strict fp32 (t %.2g) fits" % (name, policy_err)
    return t, t, text + ("; widened to %g for precision %s: %dx its own error against strict fp32 (t %.2g by the judge's "
                         "rule), rounded up to one digit" % (t, name, POLICY_MARGIN, policy_err))


def fp64_error(model, call_args, eager):
    """The fp32 model's error against itself in fp64 on the same inputs: (allclose t, max |diff|, reason).
    When the fp64 copies do not fit (a multi-GiB problem), the first 1/8 (then 1/64) of a leading
    dimension that all tensor inputs and outputs share is measured, fp32 and fp64 alike on it."""
    if not all(o.dtype == torch.float32 for o in eager):
        return None, None, "outputs are not all float32"
    lead = {x.shape[0] if x.dim() else None for x in call_args if isinstance(x, torch.Tensor)}
    lead |= {o.shape[0] if o.dim() else None for o in eager}
    fractions = [1] + ([8, 64] if len(lead) == 1 and None not in lead and next(iter(lead)) >= 8 else [])
    why = ""
    for f in fractions:
        try:
            if f == 1:
                return _fp64_error(model, call_args, eager) + ("",)
            n = max(1, next(iter(lead)) // f)
            part = [x[:n] if isinstance(x, torch.Tensor) else x for x in call_args]
            with torch.no_grad():
                ref = flat_outputs(model(*part))
            t, m = _fp64_error(model, part, ref)
            return t, m, "measured on the first %d of %d along dim 0 (%s)" % (n, next(iter(lead)), why)
        except Exception as e:
            why = "fp64 run failed: %s: %s" % (type(e).__name__, one_line(e, 120))
            if torch.cuda.is_available():
                torch.cuda.empty_cache()
    return None, None, why


def _fp64_error(model, call_args, eager):
    import copy
    m64 = copy.deepcopy(model).double()
    args64 = [x.double() if isinstance(x, torch.Tensor) and x.is_floating_point() else x for x in call_args]
    with torch.no_grad():
        out64 = flat_outputs(m64(*args64))
    del m64, args64
    if len(out64) != len(eager) or any(a.shape != b.shape for a, b in zip(eager, out64)):
        raise RuntimeError("the fp64 model's outputs differ in shape")
    errs = [allclose_t(a, b) for a, b in zip(eager, out64)]
    return max([e[0] for e in errs] + [0.0]), max([e[1] for e in errs] + [0.0])
