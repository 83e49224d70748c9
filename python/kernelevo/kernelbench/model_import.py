"""A problem imported as a whole model (level 3, --regions): a model folder of region tasks made by
kernelevo.export_model (python/kernelevo/model_plan.md)."""
import os
import time

import torch

from .common import Phases, Refused, ShrinkRefused, load_problem, one_line, task_name
from .problem import build_model, draw_inputs, shrink, shrunk_numel
from .tolerance import DEFAULT_PRECISION


def import_model(path, args, max_numel, emit, joint=False):
    """A problem as a whole model (level 3): built and its inputs drawn as _import_one does, then
    kernelevo.export_model traces it, times its regions and writes OUT/NAME/ as a model folder
    (python/kernelevo/model_plan.md: plan.json, plan.md, regions/TASK/ per region worth a kernel).
    A region that cannot be imported faithfully (BatchNorm or Dropout in training mode, ...) stays
    in PyTorch with its reason in the plan; only a model that cannot be traced at all is refused."""
    name = task_name(path)
    phases = Phases(name, emit)
    src, mod = load_problem(path)
    changed = shrink(mod, max_numel, joint) if max_numel > 0 else {}
    shrunk_note = " (with sizes shrunk by --max-numel: %s)" % ", ".join(
        "%s=%s" % (k, v[1]) for k, v in changed.items()) if changed else ""
    phases.done("load")
    t0 = time.time()
    model = build_model(mod, shrunk_note).to(torch.device(args.device))
    raw, _ = draw_inputs(mod, args, 42, shrunk_note)
    for i, x in enumerate(raw):
        if not isinstance(x, torch.Tensor):
            raise Refused("input %d is a %s: a model import takes tensor inputs only" % (i, type(x).__name__))
    phases.done("build")
    from ..model_export import export_model
    from ..torch_task import ExportError
    p = getattr(args, "precision", None) or DEFAULT_PRECISION
    try:
        plan = export_model(model, tuple(raw), os.path.join(args.out, name), name=name, device=args.device, quiet=True,
                            precision={k: p[k] for k in ("policy", "cudnn_tf32", "matmul_tf32")},
                            source=os.path.abspath(path))
    except ExportError as e:  # at shrunk sizes, maybe only there (an image size the model asserts): tried again larger
        raise (ShrinkRefused if shrunk_note else Refused)("the model cannot be exported%s: %s" % (shrunk_note, one_line(e)))
    phases.done("export")
    result = {"source": os.path.abspath(path), "name": name, "status": "ok", "kind": "model",
              "plan": os.path.relpath(plan, args.out), "phases": phases.seconds, "seconds": time.time() - t0}
    if changed:
        result["shrunk"] = {k: v[1] for k, v in changed.items()}
        result["shrunk_numel"] = shrunk_numel(mod, max_numel)
    return result
