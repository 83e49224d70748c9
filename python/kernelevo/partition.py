"""ModelGraph.partition(): the traced nodes cut into contiguous regions an expert would fuse (each a
range of the topological order, so convex): an anchor (gemm, conv, rnn, attention) with its pointwise
epilogue; a reduction/normalisation with the non-anchor ops after it; a gemm -> softmax -> gemm chain
as one attention region; ops that cannot be imported faithfully alone in a refused region."""
import re

import torch

from .kernelbench.common import identifier
from .kernelbench.trace import DROPOUT_OPS, RANDOM_OPS  # the importer's sets: one source
from .nodes import SCALAR_OPS, _is_tensor, _scope, out_of_place

# The ops a region is built around (node_class): anchors by kind, reductions and views.
GEMM_OPS = {"aten::linear", "aten::matmul", "aten::mm", "aten::bmm", "aten::addmm", "aten::baddbmm",
            "aten::einsum", "aten::addbmm", "aten::addmv", "aten::mv", "aten::bilinear", "aten::_addmm_activation"}
CONV_OPS = {"aten::_convolution", "aten::convolution", "aten::conv1d", "aten::conv2d", "aten::conv3d",
            "aten::conv_transpose1d", "aten::conv_transpose2d", "aten::conv_transpose3d"}
RNN_OPS = {"aten::lstm", "aten::gru", "aten::rnn_tanh", "aten::rnn_relu", "aten::lstm_cell", "aten::gru_cell",
           "aten::rnn_tanh_cell", "aten::rnn_relu_cell"}
ATTENTION_OPS = {"aten::scaled_dot_product_attention", "aten::_scaled_dot_product_attention",
                 "aten::_scaled_dot_product_flash_attention", "aten::_scaled_dot_product_efficient_attention",
                 "aten::_native_multi_head_attention", "aten::_transformer_encoder_layer_fwd"}
ANCHORS = [(GEMM_OPS, "gemm"), (CONV_OPS, "conv"), (RNN_OPS, "rnn"), (ATTENTION_OPS, "attention")]
ANCHOR_KINDS = ("gemm", "conv", "rnn", "attention")
REDUCTION_OPS = {"aten::softmax", "aten::log_softmax", "aten::_softmax", "aten::layer_norm", "aten::batch_norm",
                 "aten::group_norm", "aten::instance_norm", "aten::native_layer_norm", "aten::mean", "aten::sum",
                 "aten::amax", "aten::amin", "aten::max", "aten::min", "aten::var", "aten::std", "aten::var_mean",
                 "aten::norm", "aten::frobenius_norm", "aten::logsumexp", "aten::prod", "aten::argmax",
                 "aten::argmin", "aten::cumsum", "aten::max_pool1d", "aten::max_pool2d", "aten::max_pool3d",
                 "aten::avg_pool1d", "aten::avg_pool2d", "aten::avg_pool3d", "aten::adaptive_avg_pool1d",
                 "aten::adaptive_avg_pool2d", "aten::adaptive_avg_pool3d", "aten::adaptive_max_pool2d",
                 "aten::max_pool2d_with_indices", "aten::rms_norm", "aten::cross_entropy_loss", "aten::nll_loss"}
VIEW_OPS = {"aten::view", "aten::reshape", "aten::permute", "aten::transpose", "aten::t", "aten::contiguous",
            "aten::flatten", "aten::unflatten", "aten::unsqueeze", "aten::squeeze", "aten::expand",
            "aten::expand_as", "aten::view_as", "aten::reshape_as", "aten::slice", "aten::select", "aten::narrow",
            "aten::split", "aten::split_with_sizes", "aten::chunk", "aten::unbind", "aten::size", "aten::numel",
            "aten::dim", "aten::detach", "aten::alias", "aten::unsafe_split", "aten::unsafe_chunk"}
SOFTMAX_OPS = {"aten::softmax", "aten::_softmax"}
ANCHOR_OF = {op: kind for ops, kind in ANCHORS for op in ops}


class Region:
    """A contiguous range [start, end) of ModelGraph.nodes (convex), as one task or left in PyTorch."""

    def __init__(self, start, end, kind):
        self.start, self.end, self.kind = start, end, kind
        self.name = self.task_name = ""
        self.ops, self.inputs, self.weights, self.outputs = [], [], [], []
        self.status, self.reason = "task", ""
        self.pulled = []  # nodes before start that compute weight-derived values the region uses
        self.functional = []  # in-place ops on a region input, run out of place by region_module

    def __repr__(self):
        return "Region(%s, %s, [%d, %d), %s)" % (self.name, self.kind, self.start, self.end, self.status)


def node_class(g, i):
    """"free" (shape or weight arithmetic), an anchor kind, "reduction", "view" or "pointwise"."""
    kind, _, ins, outs = g.steps[i]
    if all(u in g.static or u in g.free for u in outs):
        return "free"
    if kind in ANCHOR_OF:
        return ANCHOR_OF[kind]
    if kind == "aten::batch_norm" and len(ins) >= 6 and g.constants.get(ins[5]) is False:
        return "pointwise"  # in eval mode, a per-channel affine map: the anchor's epilogue
    if kind in REDUCTION_OPS:
        return "reduction"
    if kind in VIEW_OPS or kind.startswith("prim::"):
        return "view"
    return "pointwise"


def refusal(g, i):
    """Why node i cannot be part of a task (the importer's check_graph rules), or ""."""
    kind, _, ins, _ = g.steps[i]
    const = [g.constants.get(u) for u in ins]
    if kind in RANDOM_OPS:
        return "%s draws random numbers: its output cannot be checked against a fixed reference" % kind
    if kind in DROPOUT_OPS and len(ins) >= 3 and const[2] is not False and const[1] not in (0, 0.0):
        return ("Dropout in training mode (p = %g): random output; call model.eval() for inference"
                % (const[1] if isinstance(const[1], (int, float)) else float("nan")))
    if kind == "aten::batch_norm" and len(ins) >= 6 and const[5] is not False:
        return ("BatchNorm in training mode: it normalizes with batch statistics and updates its running "
                "statistics on every call; call model.eval() for inference")
    for u, v in zip(ins, const):
        if isinstance(v, torch.Tensor) and v.numel() > 1:
            return ("%s uses a tensor that is neither a parameter nor a buffer (shape %s): a kernel could not see "
                    "its values" % (kind, list(v.shape)))
    if _in_place_kind(kind) and ins and ins[0] in g.weight_of:
        return "%s changes the model's %s in place%s" % (kind, g.weight_of[ins[0]], (
            "; call model.eval() for inference" if g.weight_of[ins[0]].endswith("num_batches_tracked") else ""))
    if kind in SCALAR_OPS and ins[0] not in g.static and ins[0] not in g.free:
        return "%s reads a value of a tensor (the trace fixed it: data-dependent)" % kind
    return ""


PACKING = ("prim::ListConstruct", "prim::TupleConstruct")


def _new(g, regions, cur, i, kind):
    """A region starting at node i, with the list/tuple constructions just before i that only nodes
    from i on use (an op's list argument stays with the op: lists do not cross region boundaries)."""
    start = i
    while cur is not None and start > cur.start and g.steps[start - 1][0] in PACKING and \
            all(j >= i for u in g.steps[start - 1][3] for j in g._uses.get(u, [])):
        start -= 1
    if cur is not None and start < cur.end:
        cur.end = start
        if cur.end == cur.start:
            regions.remove(cur)
    r = Region(start, i, kind)
    regions.append(r)
    return r


def _scan(g, classes, refused):
    """[Region] from one pass over the nodes (statuses and names come later)."""
    regions, cur = [], None
    for i, c in enumerate(classes):
        if refused[i]:
            kind = c if c in ANCHOR_KINDS + ("reduction", "pointwise") else "pointwise"
            last = regions[-1] if regions else None
            if last is not None and last.status == "refused" and last.end == i and \
                    _scope(g.nodes[i]) and _scope(g.nodes[last.start]) == _scope(g.nodes[i]):
                # One module's refused ops are one refused region (a training-mode BatchNorm's
                # num_batches_tracked += 1 and its batch_norm): the heavier op's kind and reason.
                last.end = i + 1
                if last.kind == "pointwise" and kind != "pointwise":
                    last.kind, last.reason = kind, refused[i]
                continue
            r = Region(i, i + 1, kind)
            r.status, r.reason = "refused", refused[i]
            regions.append(r)
            cur = None
            continue
        if c in ANCHOR_KINDS:
            cur = _new(g, regions, cur, i, c)
        elif c == "reduction":
            if cur is None or cur.kind in ANCHOR_KINDS:
                cur = _new(g, regions, cur, i, "reduction")
            else:
                cur.kind = "reduction"
        elif cur is None:
            cur = Region(i, i, "pointwise" if c == "pointwise" else "view")
            regions.append(cur)
        elif c == "pointwise" and cur.kind == "view":
            cur.kind = "pointwise"
        cur.end = i + 1
    return regions


def _merge_free(regions, classes):
    """A region of only free nodes (shape arithmetic) joins the next region (or the one before)."""
    out = []
    carry = None
    for r in regions:
        if r.status == "task" and all(classes[i] == "free" for i in range(r.start, r.end)):
            if carry is None:
                carry = r.start
            continue
        if carry is not None:
            if r.status == "refused" and out:
                out[-1].end = r.start
            elif r.status == "refused":
                out.append(Region(carry, r.start, "view"))
            else:
                r.start = carry
            carry = None
        out.append(r)
    if carry is not None:
        if out:
            out[-1].end = len(classes)
        else:
            out.append(Region(carry, len(classes), "view"))
    return out


def _peel_views(g, regions, classes):
    """Views at the end of a region that only the attention region after it reads move into it (q, k,
    v split and transposed out of a qkv projection are the attention's prologue: the projection's
    output stays one contiguous tensor); shape arithmetic moves along. A region left empty goes."""
    outputs = {v.unique() for v in g.output_values}
    for a, b in zip(list(regions), list(regions[1:])):
        if a.status != "task" or b.status != "task" or b.kind != "attention":
            continue
        while a.end - a.start > 0:
            j = a.end - 1
            if classes[j] != "free" and not (classes[j] == "view" and all(
                    u not in outputs and all(b.start <= k < b.end for k in g._uses.get(u, []))
                    for u in g.steps[j][3])):
                break
            a.end, b.start = j, j
        if a.end == a.start:
            regions.remove(a)
    return regions


def _reaches(g, src, lo, hi, target_ins):
    """Whether value src reaches one of target_ins through the nodes lo..hi-1."""
    live = {src}
    for i in range(lo, hi):
        _, _, ins, outs = g.steps[i]
        if any(u in live for u in ins):
            live.update(outs)
    return any(u in live for u in target_ins)


def _merge_attention(g, regions, classes):
    """gemm -> (pointwise, views, masking) -> softmax -> gemm as one attention region."""
    k, out = 0, []
    while k < len(regions):
        a = regions[k]
        if k + 2 < len(regions) and a.kind == "gemm" and regions[k + 1].kind == "reduction" and \
                regions[k + 2].kind == "gemm" and a.status == regions[k + 1].status == regions[k + 2].status == "task":
            s = next((i for i in range(regions[k + 1].start, regions[k + 1].end)
                      if g.steps[i][0] in SOFTMAX_OPS), None)
            b_anchor = regions[k + 2].start
            while classes[b_anchor] not in ANCHOR_KINDS:
                b_anchor += 1
            a_anchor = a.start
            while classes[a_anchor] not in ANCHOR_KINDS:
                a_anchor += 1
            if s is not None and _reaches(g, g.steps[a_anchor][3][0], a_anchor + 1, s, g.steps[s][2]) and \
                    _reaches(g, g.steps[s][3][0], s + 1, b_anchor, g.steps[b_anchor][2]):
                out.append(Region(a.start, regions[k + 2].end, "attention"))
                k += 3
                continue
        out.append(a)
        k += 1
    return out


def _io(g, r):
    """The region's inputs, weights, outputs and pulled nodes (weight-derived values computed before it)."""
    rng = range(r.start, r.end)
    defined = {u for i in rng for u in g.steps[i][3]}
    inputs, weights, pulled, seen = [], [], set(), set()

    def need(u):
        if u in seen or u in defined or u in g.constants:
            return
        seen.add(u)
        if u in g.weight_of:
            weights.append(g.weight_of[u])
        elif u in g.static:
            return
        elif u in g.free:
            j = g._def[u]
            pulled.add(j)
            for w in g.steps[j][2]:
                need(w)
        else:
            inputs.append(u)

    for i in rng:
        for u in g.steps[i][2]:
            need(u)
    later = {u for i in range(r.end, len(g.steps)) for u in g.steps[i][2]} | {v.unique() for v in g.output_values}
    outs = [u for i in rng for u in g.steps[i][3] if u in later and u not in g.static and
            (u not in g.free or u in {v.unique() for v in g.output_values})]
    value = g.value_of
    r.inputs, r.outputs = [value[u] for u in inputs], [value[u] for u in outs]
    r.weights, r.pulled = list(dict.fromkeys(weights)), sorted(pulled)
    bad = [v for v in r.inputs + r.outputs if not _is_tensor(v)]
    if bad and r.status == "task":
        r.status, r.reason = "refused", "a non-tensor value (%s) crosses the region's boundary" % bad[0].type()


def _in_place_kind(kind):
    return kind.startswith("aten::") and kind.endswith("_") and not kind.endswith("__")


def _in_place(g, r):
    """In-place ops on a region input: the region module runs them out of place (r.functional) when
    nothing after the region reads that input; else the reason the region is refused, or ""."""
    ins = {v.unique() for v in r.inputs}
    later = {u for i in range(r.end, len(g.steps)) for u in g.steps[i][2]} | {v.unique() for v in g.output_values}
    r.functional = []
    for i in range(r.start, r.end):
        kind, _, args, _ = g.steps[i]
        if _in_place_kind(kind) and args and args[0] in ins:
            if args[0] in later or out_of_place(g.steps[i]) is None:
                return "%s changes the region's input %s in place and the model reads it later" % (
                    kind, g.value_of[args[0]].debugName())
            r.functional.append(i)
    return ""


def _name(g, r, classes):
    """The module path of the region's anchor (else its first compute op), else the op's name."""
    first = next((i for i in range(r.start, r.end) if classes[i] in ANCHOR_KINDS), None)
    if first is None:
        first = next((i for i in range(r.start, r.end) if classes[i] not in ("free", "view")), r.start)
    return _scope(g.nodes[first]) or g.steps[first][0].split("::")[-1]


def partition(g):
    classes = [node_class(g, i) for i in range(len(g.steps))]
    refused = [refusal(g, i) for i in range(len(g.steps))]
    regions = _merge_free(_scan(g, classes, refused), classes)
    regions = _peel_views(g, _merge_attention(g, regions, classes), classes)
    names, tasks = {}, set()
    model = re.sub(r"[^A-Za-z0-9_]", "_", type(g.model).__name__.lower())
    for r in regions:
        _io(g, r)
        if r.status == "task":
            reason = _in_place(g, r)
            if reason:
                r.status, r.reason = "refused", reason
        if r.kind == "view" and r.status == "task":
            r.status = "view"
        base = _name(g, r, classes)
        r.name, n = base, 1
        while r.name in names:  # a module with several regions: NAME, NAME.2, NAME.3 (unique over the plan)
            n += 1
            r.name = "%s.%d" % (base, n)
        names[r.name] = True
        r.task_name = identifier("%s_%s" % (model, r.name.replace(".", "_")), tasks)
        r.ops = [g.steps[i][0] for i in range(r.start, r.end)
                 if classes[i] not in ("free",) and not g.steps[i][0].startswith("prim::")] or \
            [g.steps[i][0] for i in range(r.start, r.end) if not g.steps[i][0].startswith("prim::")]
    return regions


def _const_key(v):
    """A constant argument as a comparable value (a tensor by its dtype, shape and values)."""
    if isinstance(v, torch.Tensor):
        return ("tensor", str(v.dtype), tuple(v.shape), tuple(v.flatten().tolist()) if v.numel() <= 64 else id(v))
    if isinstance(v, (list, tuple)):
        return tuple(_const_key(x) for x in v)
    return (type(v).__name__, repr(v))


def signature(g, r):
    """What a region computes, whatever its place in the graph: its nodes (the weight-derived ones it
    pulls first) by kind, each argument as a constant's value, a region input by position, a weight by
    its position in r.weights or a value of an earlier node of the region; and which of its values are
    its outputs; a shape-derived value computed before it (fixed by the trace) by its value. Two regions
    with equal signatures compute the same function of their inputs and weights (an RNN cell unrolled
    over the time steps, a weight-tied layer called twice, the blocks of a stack with weights of their
    own). A value the region reads that is none of these makes the signature unique to the region."""
    steps = list(r.pulled) + list(range(r.start, r.end))
    local, pos = {}, {v.unique(): k for k, v in enumerate(r.inputs)}
    wpos = {name: k for k, name in enumerate(r.weights)}
    for n, i in enumerate(steps):
        for k, u in enumerate(g.steps[i][3]):
            local[u] = (n, k)
    nodes = []
    for i in steps:
        args = []
        for u in g.steps[i][2]:
            if u in local:
                args.append(("node",) + local[u])
            elif u in pos:
                args.append(("input", pos[u]))
            elif u in g.weight_of:
                args.append(("weight", wpos.get(g.weight_of[u], g.weight_of[u])))
            elif u in g.constants:
                args.append(("const", _const_key(g.constants[u])))
            elif u in g.static and u in g._static_values:  # shape arithmetic fixed by the trace: its value
                args.append(("static", _const_key(g._static_values[u])))
            else:
                return ("unique", r.start)
        nodes.append((g.steps[i][0], tuple(args)))
    return (tuple(nodes), tuple(local.get(v.unique()) for v in r.outputs))
