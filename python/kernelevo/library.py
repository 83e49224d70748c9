"""torch.ops.kernelevo.NAME: a task as a PyTorch operator with a typed schema, made from task.json (the one
source for the task's inputs and outputs).

The schema has one Tensor argument per task input, in task.json's order and by its name (the caller's
inputs, then the module's weights), and returns a Tensor, or a tuple of Tensors for a task with several
outputs: e.g. `block(Tensor x, Tensor fc_weight, Tensor fc_bias) -> Tensor`.

PyTorch 2.4 and newer: torch.library.custom_op, with a fake (meta) kernel (register_fake: empty tensors
of the output shapes the contract gives, see output_shapes()) and a backward (register_autograd: the
vector-Jacobian product of the task's reference, recomputed at the saved inputs), so the operator works
under torch.compile(fullgraph=True) and in training code.
Older PyTorch (1.13 to 2.3): torch.library.Library("kernelevo", "FRAGMENT") defines the same schema with
the same implementation for CPU and CUDA and the fake as its Meta kernel; it has no backward, so
KernelEvoOp runs the reference itself when autograd is recording (its outputs keep their gradients).
"""
import keyword
import warnings

import torch

_OPS = {}  # NAME -> {"schema", "autograd", "module" (the KernelEvoOp the operator runs now), "handle"}


def arg_names(task):
    """The schema's argument names: the task inputs' names, or argK where a name cannot be one."""
    return [s["name"] if s["name"].isidentifier() and not keyword.iskeyword(s["name"]) else "arg%d" % k
            for k, s in enumerate(task["inputs"])]


def schema_of(task):
    """The typed schema (without the operator's name) of a task: '(Tensor x, Tensor w) -> Tensor'."""
    args = ", ".join("Tensor " + n for n in arg_names(task))
    n_out = len(task["outputs"])
    return "(%s) -> %s" % (args, "Tensor" if n_out == 1 else "(%s)" % ", ".join(["Tensor"] * n_out))


def _dims(spec_shape, bound):
    return [d if isinstance(d, int) else bound.get(d) for d in spec_shape]


def output_shapes(task, input_shapes):
    """(index of the task's shape set the inputs have or None, the outputs' shapes or None).

    task.json gives every shape as literal sizes and dimension names, bound by each shape set. Inputs of
    one of the shape sets (the shapes the kernel was validated for) give that set's output shapes.
    Inputs of other sizes give output shapes only where that is derivable from task.json: every
    literal size of the inputs is the same, each dimension name has one size across the inputs, and
    every output dimension is a literal or a name some input binds. Otherwise (an output dimension no
    input has, e.g. a reduction's size fixed by the trace) the shapes are not derivable: None."""
    input_shapes = [list(s) for s in input_shapes]
    specs = task["inputs"]
    if len(input_shapes) != len(specs):
        return None, None
    for k, bound in enumerate(task.get("shapes") or [{}]):
        if all(_dims(s["shape"], bound) == shape for s, shape in zip(specs, input_shapes)):
            return k, [_dims(o["shape"], bound) for o in task["outputs"]]
    bound = {}
    for s, shape in zip(specs, input_shapes):
        if len(s["shape"]) != len(shape):
            return None, None
        for d, size in zip(s["shape"], shape):
            if isinstance(d, int):
                if d != size:
                    return None, None
            elif bound.setdefault(d, size) != size:
                return None, None
    outs = [_dims(o["shape"], bound) for o in task["outputs"]]
    return None, (outs if all(d is not None for o in outs for d in o) else None)


def _backward_of(entry):
    """register_autograd's (setup_context, backward): the reference's vector-Jacobian product."""

    def setup_context(ctx, inputs, output):
        ctx.module = entry["module"]
        ctx.save_for_backward(*inputs)

    def backward(ctx, *grads):
        inputs = ctx.saved_tensors
        with torch.enable_grad():
            xs = [t.detach().requires_grad_(need and t.is_floating_point())
                  for t, need in zip(inputs, ctx.needs_input_grad)]
            outs = ctx.module.reference(*xs)
            outs = list(outs) if isinstance(outs, (tuple, list)) else [outs]
            pairs = [(o, g) for o, g in zip(outs, grads) if g is not None and o.requires_grad]
            wrt = [x for x in xs if x.requires_grad]
            got = iter(torch.autograd.grad([o for o, _ in pairs], wrt, [g for _, g in pairs], allow_unused=True)
                       if pairs and wrt else [None] * len(wrt))
        return tuple(next(got) if x.requires_grad else None for x in xs)

    return setup_context, backward


_LIBRARY = []  # PyTorch < 2.4: the one torch.library.Library of the namespace in this process


def _old_library():
    """torch.library.Library("kernelevo", ...) of this process: FRAGMENT where this PyTorch has it
    (1.13 has only DEF, which a namespace may have once per process)."""
    if not _LIBRARY:
        try:
            _LIBRARY.append(torch.library.Library("kernelevo", "FRAGMENT"))
        except ValueError:
            _LIBRARY.append(torch.library.Library("kernelevo", "DEF"))
    return _LIBRARY[0]


def register(module):
    """Makes torch.ops.kernelevo.NAME run `module` (a KernelEvoOp: its _run and _fake). Defined once per
    name and process; a later load_op of a task of the same name and schema takes the operator over
    (modules loaded before keep working, without it). Returns the registry entry, or None where this
    PyTorch has no torch.library (the module then runs without an operator)."""
    name, schema = module.task["name"], schema_of(module.task)
    entry = _OPS.get(name)
    if entry is not None:
        if entry["schema"] != schema:
            raise RuntimeError("torch.ops.kernelevo.%s is already defined in this process as %s%s; this task needs %s%s "
                               "(export it under another name)" % (name, name, entry["schema"], name, schema))
        entry["module"]._through_op = False
        entry["module"] = module
        module._through_op, module._op_autograd = True, entry["autograd"]
        return entry
    entry = {"schema": schema, "module": module}

    def impl(*args):
        return entry["module"]._run(args)

    def fake(*args):
        return entry["module"]._fake(args)

    if hasattr(torch.library, "custom_op") and hasattr(torch.library, "register_fake"):
        op = torch.library.custom_op("kernelevo::" + name, impl, mutates_args=(), schema=schema)
        op.register_fake(fake)
        setup_context, backward = _backward_of(entry)
        op.register_autograd(backward, setup_context=setup_context)
        entry.update(handle=op, autograd=True, api="torch.library.custom_op")
    elif hasattr(torch.library, "Library"):
        try:
            lib = _old_library()
            lib.define(name + schema)
        except RuntimeError as e:  # e.g. PyTorch 1.13 with a C++ TORCH_LIBRARY(kernelevo) module loaded
            warnings.warn("torch.ops.kernelevo.%s is not defined (%s); the module runs without it" % (
                name, " ".join(str(e).split())[:300]), stacklevel=3)
            return None
        for key in ("CPU", "CUDA"):
            lib.impl(name, impl, key)
        lib.impl(name, fake, "Meta")
        entry.update(handle=lib, autograd=False, api="torch.library.Library")
    else:
        return None
    _OPS[name] = entry
    module._through_op, module._op_autograd = True, entry["autograd"]
    return entry

