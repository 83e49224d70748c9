"""KernelEvo from Python: turn a PyTorch module or function into a task for `kernelevo search`
(export_task) and call the kernel the search found as an operator (load_op).

    import kernelevo
    kernelevo.export_task(model, (x,), "kevo_tasks", name="mlp_block")
    # $ kernelevo search --task kevo_tasks/mlp_block/task.json --out kevo_tasks/kernels --model ...
    op = kernelevo.load_op("kevo_tasks/mlp_block")
    y = op(x)            # the evolved kernel on this GPU, else the traced reference (with a warning)
    y = torch.ops.kernelevo.mlp_block(x, *weights)   # the same as an operator (typed schema, fake kernel)

A whole model (export_model): traced, cut into regions (a matmul/conv/attention with its epilogue, a
normalisation, ...), each region's share of the time measured, one task per region worth a kernel:
    kernelevo.export_model(model.eval(), (x,), "kevo_model")   # kevo_model/plan.json, plan.md, regions/
    # $ kernelevo search --model-dir kevo_model ...
    fast = kernelevo.load_model("kevo_model", model)   # evolved regions as operators, checked end to end
    kernelevo.compare_model(model, fast)                # times vs PyTorch eager and torch.compile

Install: `pip install ./python` from a KernelEvo checkout (offline: add --no-build-isolation).
"""
from .torch_task import ExportError, export_task
from .op import KernelEvoOp, load_op
from .model_export import PLAN_FORMAT, export_model
from .model_load import KernelEvoModel, load_model
from .model_compare import compare_model

__all__ = ["export_task", "load_op", "ExportError", "KernelEvoOp", "export_model", "PLAN_FORMAT", "load_model",
           "KernelEvoModel", "compare_model"]
