#!/usr/bin/env python3
"""Times a KernelBench problem's Python model on the GPU, in eager PyTorch and under torch.compile
(inductor, default mode), the way KernelBench does: model built after torch.manual_seed(42) on the
CPU and moved, 3 warm-ups, 100 timed calls with CUDA events, L2 flushed before each by writing a
256 MiB buffer; mean in microseconds. Prints one JSON object: {"eager_us": .., "compile_us": ..}
or {"error": "..."}. Used by `kernelevo bench --torch-compile`."""
import json
import sys
import types


def main():
    try:
        import torch
    except Exception as e:
        print(json.dumps({"error": "no PyTorch: %s" % e}))
        return 0
    if not torch.cuda.is_available():
        print(json.dumps({"error": "no CUDA device for PyTorch %s" % torch.__version__}))
        return 0
    if not hasattr(torch, "compile"):
        print(json.dumps({"error": "PyTorch %s has no torch.compile" % torch.__version__}))
        return 0
    mod = types.ModuleType("problem")
    exec(compile(open(sys.argv[1], encoding="utf-8").read(), sys.argv[1], "exec"), mod.__dict__)
    dev = torch.device("cuda")
    torch.manual_seed(42)
    init = mod.get_init_inputs()
    torch.manual_seed(42)
    model = mod.Model(*init).to(dev)
    torch.manual_seed(42)
    inputs = [x.to(dev) if isinstance(x, torch.Tensor) else x for x in mod.get_inputs()]
    flush = torch.empty(256 << 20, dtype=torch.uint8, device=dev)

    def timed(fn, trials=100, warmup=3):
        with torch.no_grad():
            for _ in range(warmup):
                fn(*inputs)
            torch.cuda.synchronize()
            total = 0.0
            for _ in range(trials):
                flush.zero_()
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                start.record()
                fn(*inputs)
                end.record()
                torch.cuda.synchronize()
                total += start.elapsed_time(end)
        return total / trials * 1000.0

    res = {"eager_us": timed(model), "torch": torch.__version__}
    try:
        res["compile_us"] = timed(torch.compile(model))
    except Exception as e:
        res["compile_error"] = " ".join(str(e).split())[:300]
    print(json.dumps(res))
    return 0


if __name__ == "__main__":
    sys.exit(main())
