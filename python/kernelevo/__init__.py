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
import importlib

from ._version import __version__  # (no torch: a plain string)

# Public name -> the submodule that defines it. Imported on first use (PEP 562), so that
# `import kernelevo` (and every `import kernelevo.kernelbench...` of the KernelBench importer's
# sandboxed per-problem processes) loads none of them, nor torch. Nothing here registers anything at
# import: a torch.ops.kernelevo.NAME operator is defined by load_op (library.register), as before.
_EXPORTS = {
    "export_task": "torch_task",
    "ExportError": "torch_task",
    "load_op": "op",
    "KernelEvoOp": "op",
    "export_model": "model_export",
    "PLAN_FORMAT": "model_export",
    "load_model": "model_load",
    "KernelEvoModel": "model_load",
    "compare_model": "model_compare",
}
# The submodules `import kernelevo` used to load (directly or through the names above), still
# reachable as attributes (kernelevo.op, kernelevo.graph, ...).
_SUBMODULES = ("torch_task", "op", "library", "graph", "partition", "model_export", "model_folder", "model_load", "model_compare",
               "kernelbench")

__all__ = list(_EXPORTS)


def __getattr__(name):
    if name in _EXPORTS:
        value = getattr(importlib.import_module("." + _EXPORTS[name], __name__), name)
        globals()[name] = value  # once: later lookups do not come back here
        return value
    if name in _SUBMODULES:
        return importlib.import_module("." + name, __name__)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(_EXPORTS) | set(_SUBMODULES))
