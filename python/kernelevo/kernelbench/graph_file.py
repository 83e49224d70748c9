"""What the task says about its traced graph: the FLOPs of its convolutions and matmuls (the task's
"flops") and graph.py (the traced forward, its arguments named as the task's inputs)."""
import os
import re

import torch

from .common import DTYPES
from .trace import constant_value, graph_nodes


# ---- FLOPs of the traced graph's convolutions and matmuls ---------------------------------------------

CONV_OPS = {"aten::_convolution", "aten::convolution", "aten::conv1d", "aten::conv2d", "aten::conv3d",
            "aten::conv_transpose1d", "aten::conv_transpose2d", "aten::conv_transpose3d", "aten::cudnn_convolution",
            "aten::mkldnn_convolution"}
MATMUL_OPS = {"aten::mm", "aten::bmm", "aten::addmm", "aten::matmul", "aten::linear", "aten::baddbmm",
              "aten::addbmm", "aten::mv", "aten::addmv", "aten::einsum"}


def _sizes(value):
    t = value.type()
    if not isinstance(t, torch._C.TensorType):
        return None
    try:
        s = t.sizes()
    except Exception:
        return None
    return [int(x) for x in s] if s is not None else None


def _prod(xs):
    p = 1
    for x in xs:
        p *= x
    return p


def graph_flops(graph):
    """The task's "flops": the fewest floating-point operations of the known algorithms (tool/sol/sol.h),
    2 * multiply-adds of the matmuls and convolutions (transposed and grouped too), from the shapes the
    trace recorded. A convolution counts at Winograd's limit, one multiply-add per output and input
    channel of its group (per input and output channel for a transposed one): its direct count divided
    by its kernel window, so that the compute floor stays a lower bound for Winograd and FFT kernels.
    Returns (total, {kind: flops})."""
    by_kind = {}
    for node in graph_nodes(graph):
        kind = node.kind()
        if kind not in CONV_OPS and kind not in MATMUL_OPS:
            continue
        ins = [_sizes(v) for v in node.inputs()]
        out = _sizes(node.output()) if node.outputs() else None
        if out is None:
            continue
        macs = 0
        if kind in CONV_OPS:
            x, w = ins[0], ins[1]
            if not w or not x:
                continue
            transposed = "transpose" in kind
            if kind in ("aten::_convolution", "aten::convolution"):
                transposed = constant_value(list(node.inputs())[6]) is True
            # weight: [C_out, C_in/groups, k...] (transposed: [C_in, C_out/groups, k...]); the window
            # w[2:] is left out (Winograd's limit, see above)
            macs = (_prod(x) if transposed else _prod(out)) * w[1]
            kind = "conv_transpose" if transposed else "conv"
        elif kind == "aten::einsum":
            continue  # the contraction is not in the shapes alone
        else:
            a, b = {"aten::addmm": (1, 2), "aten::baddbmm": (1, 2), "aten::addbmm": (1, 2),
                    "aten::addmv": (1, 2)}.get(kind, (0, 1))
            if ins[a] is None or not ins[a]:
                continue
            k = ins[a][-1]
            if kind == "aten::addbmm":
                macs = _prod(ins[a]) * ins[b][-1]
            else:
                macs = _prod(out) * k
            kind = kind.split("::")[1]
        by_kind[kind] = by_kind.get(kind, 0) + 2 * macs
    return sum(by_kind.values()), by_kind


# ---- graph.py: what the model computes, as the kernel receives it --------------------------------------

_NOT_RENAMED = {"torch", "ops", "CONSTANTS", "Tensor", "self", "annotate", "None", "True", "False", "int", "float",
                "bool", "str", "List", "Optional", "Tuple", "def", "return", "if", "else", "for", "in", "and", "or",
                "not", "is", "while", "range", "len"}


def graph_code(traced, arg_names):
    """The traced forward as Python-like code, its arguments renamed to the task's input names and the
    scalar constants written as values. Returns (code, {constant: value}, renamed)."""
    try:
        code, consts = traced.code_with_constants
        mapping = dict(consts.const_mapping)
    except Exception:
        code, mapping = traced.code, {}
    values = {}
    for k, v in mapping.items():
        if isinstance(v, torch.Tensor):
            v = v.item() if v.numel() == 1 else None
        if isinstance(v, (int, float, bool)):
            values[k] = v
    code = re.sub(r"CONSTANTS\.(c\d+)", lambda m: repr(values[m.group(1)]) if m.group(1) in values else m.group(0), code)
    head = re.search(r"def forward\(self,(.*?)\)\s*->", code, re.S)
    old = [a.split(":")[0].strip() for a in head.group(1).split(",")] if head else []
    if len(old) != len(arg_names):
        return code, values, False
    rename = dict(zip(old, arg_names))
    taken = set(arg_names)
    used = set(re.findall(r"[A-Za-z_]\w*", code))

    def fresh(n):
        i = 0
        while True:
            i += 1
            c = "%s_%d" % (n, i)
            if c not in used and c not in taken:
                used.add(c)
                return c
    for ident in sorted(used):
        if ident in taken and ident not in rename and ident not in _NOT_RENAMED:
            rename[ident] = fresh(ident)  # a local of the trace that has a task input's name

    def sub(m):
        return rename.get(m.group(0), m.group(0)) if m.group(0) not in _NOT_RENAMED else m.group(0)
    # Identifiers only (not attributes after a dot, not inside strings).
    out = []
    for part in re.split(r"(\"[^\"]*\"|'[^']*')", code):
        out.append(part if part[:1] in ("'", '"') else re.sub(r"(?<![\w.])[A-Za-z_]\w*", sub, part))
    return "".join(out), values, True


def graph_file(name, path, traced, specs, outputs, shape_of, bound, kinds):
    code, values, renamed = graph_code(traced, [s["name"] for s in specs])
    lines = ["# KernelBench problem %s: its forward as traced by torch.jit.trace (torch %s), the model's weights" % (
                 os.path.basename(path), torch.__version__),
             "# passed in as arguments. The kernel receives these tensors, in this order:"]
    for s in specs:
        role = "parameter/buffer %s" % s["slot"] if "slot" in s else "input"
        lines.append("#   %s: %s[%s]  (%s)" % (s["name"], s["dtype"][0], ", ".join(map(str, shape_of(s["tensor"]))), role))
    lines.append("# and writes its outputs:")
    for n, o in outputs:
        lines.append("#   %s: %s[%s]" % (n, DTYPES[o.dtype][0], ", ".join(map(str, shape_of(o)))))
    if bound:
        lines.append("# Sizes: " + ", ".join("%s = %d" % kv for kv in sorted(bound.items())))
    if values:
        lines.append("# Scalar constants of the trace, written in place: " + ", ".join(
            "CONSTANTS.%s = %r" % kv for kv in sorted(values.items())))
    if not renamed:
        lines.append("# (the arguments below are in the order above: %s)" % ", ".join(s["name"] for s in specs))
    lines.append("# Comparisons with the reference run in strict fp32 (TF32 off).")
    if kinds:
        lines.append("# Convolution/matmul FLOPs (the fewest of the known algorithms; a convolution at Winograd's limit, "
                     "one multiply-add per output and input channel): " + ", ".join("%s %d" % kv for kv in sorted(kinds.items())))
    return "\n".join(lines) + "\n" + code.rstrip() + "\n"
