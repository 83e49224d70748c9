"""KernelEvo from Python: turn a PyTorch module or function into a task for `kernelevo search`
(export_task) and call the kernel the search found as an operator (load_op).

    import kernelevo
    kernelevo.export_task(model, (x,), "kevo_tasks", name="mlp_block")
    # $ kernelevo search --task kevo_tasks/mlp_block/task.json --out kevo_tasks/kernels --model ...
    op = kernelevo.load_op("kevo_tasks/mlp_block")
    y = op(x)            # the evolved kernel on this GPU, else the traced reference (with a warning)
    y = torch.ops.kernelevo.mlp_block(x, *weights)   # the same as an operator (typed schema, fake kernel)

Install: `pip install ./python` from a KernelEvo checkout (offline: add --no-build-isolation).
"""
from .torch_task import ExportError, export_task
from .op import KernelEvoOp, load_op

__all__ = ["export_task", "load_op", "ExportError", "KernelEvoOp"]
