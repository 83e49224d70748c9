"""The importer's run over its problem files (tool/kernelbench/import_kernelbench.py parses the
arguments and calls run()): each problem in turn under its own alarm, tried again with larger sizes
when it breaks only at the shrunk ones; one JSON result per problem through `emit`."""
import json
import os
import shutil
import signal
import time
import traceback

import torch

from .common import Refused, ShrinkRefused, Timeout, one_line, task_name
from .gpu_turns import GpuTurns
from .model_import import import_model
from .task_import import import_one
from .tolerance import DEFAULT_PRECISION


def run(args, emit):
    """Imports args.files (the script's arguments) into args.out; `emit` is the entry script's print,
    which writes the protocol's lines (results, progress, a fatal error). Returns the exit code."""
    args.precision = json.loads(args.precision) if args.precision is not None else dict(DEFAULT_PRECISION)
    args.device_kind = "cuda" if args.device.startswith("cuda") else "cpu"
    if args.device_kind == "cuda" and not torch.cuda.is_available():
        emit(json.dumps({"fatal": "this PyTorch (%s) sees no CUDA device, but the tool's LibTorch runs references on "
                                  "the GPU" % torch.__version__}), flush=True)
        return 2
    args.gpu_turns = GpuTurns(getattr(args, "turns", "") if args.device_kind == "cuda" else "")
    torch.set_grad_enabled(False)
    # Strict fp32: comparisons are judged against it (TF32 differs from fp32 by up to 3.4e-4 on a conv).
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False

    def on_alarm(signum, frame):
        raise Timeout()
    signal.signal(signal.SIGALRM, on_alarm)
    for path in args.files:
        t0 = time.time()
        args.gpu_turns.take()  # before the problem's code runs; kept to the end
        res = import_file(path, args, emit)
        res.setdefault("seconds", time.time() - t0)
        shutil.rmtree(os.path.join(args.out, res["name"] + ".tmp"), ignore_errors=True)
        if args.device_kind == "cuda":
            torch.cuda.empty_cache()
        emit(json.dumps(res), flush=True)
    return 0


def import_file(path, args, emit):
    """One problem file's result, whatever happens: ok, refused (with the reason) or failed."""
    signal.alarm(max(1, int(args.timeout)))
    try:
        # A problem that breaks at the shrunk sizes is tried again with equal sizes shrunk
        # together whatever their role, then with larger limits.
        tries = [(args.max_numel, False), (args.max_numel, True), (args.max_numel * 16, True), (args.max_numel * 256, True)]
        for attempt, (limit, joint) in enumerate(tries):
            try:
                if args.regions:
                    return import_model(path, args, limit, emit, joint)
                return import_one(path, args, args.reference_source, limit, emit, joint)
            except ShrinkRefused:
                if attempt == len(tries) - 1:
                    raise
    except Refused as e:
        return {"source": os.path.abspath(path), "name": task_name(path), "status": "refused", "reason": str(e)}
    except Timeout:
        return {"source": os.path.abspath(path), "name": task_name(path), "status": "failed",
                "reason": "timed out after %d s (raise --timeout, the seconds allowed per problem%s; or shrink it with "
                          "--max-numel)" % (args.timeout, ": a whole model's regions are each traced, timed and "
                                            "checked" if args.regions else "")}
    except MemoryError:
        return {"source": os.path.abspath(path), "name": task_name(path), "status": "failed", "reason": "out of memory"}
    except Exception as e:
        return {"source": os.path.abspath(path), "name": task_name(path), "status": "failed",
                "reason": "%s: %s" % (type(e).__name__, one_line(e)), "trace": one_line(traceback.format_exc(), 2000)}
    finally:
        signal.alarm(0)
