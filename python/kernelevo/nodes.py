"""What graph.py (the interpreter) and partition.py (the regions) both read of a traced TorchScript
node: whether a value is a tensor, the module a node belongs to, the scalar conversions, and an
in-place op's out-of-place form."""
import torch

SCALAR_OPS = {"aten::Int": int, "aten::Float": float, "aten::Bool": bool, "aten::ScalarImplicit": lambda x: x.item()}


def _is_tensor(value):
    return isinstance(value.type(), torch._C.TensorType)


def _scope(node):
    """The module path of a node: "h.0.attn.c_attn" from "__module.h.0.attn/__module.h.0.attn.c_attn"."""
    last = node.scopeName().split("/")[-1]
    return last[len("__module."):] if last.startswith("__module.") else ""


def out_of_place(step):
    """The step of an in-place op (aten::relu_, aten::add_.Tensor) as its out-of-place op, or None."""
    kind, schema, ins, outs = step
    try:
        overload = torch._C.parse_schema(schema).overload_name
    except RuntimeError:
        return None
    for s in torch._C._jit_get_schemas_for_operator(kind[:-1]):
        if s.overload_name == overload and len(s.arguments) == len(ins):
            return (kind[:-1], str(s), ins, outs)
    return None
