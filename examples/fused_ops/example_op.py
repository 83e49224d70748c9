"""The example's evolvable functions as PyTorch operators: load the module that
kernelevo_torch_library(fused_ops_torch ...) builds, call the ops, backpropagate through them.

  python3 example_op.py build-example/libfused_ops_torch.so [--compile]

On a GPU the CUDA kernel of the op is KernelEvo's dispatch (the evolved sm_90 kernel on an H100/H200,
else the LibTorch reference); on the CPU it is the reference. Gradients are always the reference's.
Prints one PASS/FAIL line per check; exit 1 when one fails.
"""
import ctypes
import sys

import torch

lib = sys.argv[1] if len(sys.argv) > 1 and not sys.argv[1].startswith("--") else "build-example/libfused_ops_torch.so"
torch.ops.load_library(lib)
ops = torch.ops.kernelevo
runtime = ctypes.CDLL(lib)  # kevo_last_impl(): what the last call of a function ran
runtime.kevo_last_impl.restype = ctypes.c_char_p
failures = 0


def check(what, ok):
    global failures
    failures += 0 if ok else 1
    print(("PASS " if ok else "FAIL ") + what, flush=True)


dev = "cuda" if torch.cuda.is_available() else "cpu"
x = torch.randn(4096, 4096, device=dev, requires_grad=True)
bias = torch.randn(4096, device=dev, requires_grad=True)

y = ops.gelu_bias(x, bias)  # the op
ran = (runtime.kevo_last_impl(b"gelu_bias") or b"").decode()
ran = ran if ran not in ("", "none") else "the reference: the op's CPU kernel"
want = torch.nn.functional.gelu(x + bias)  # the reference, in Python
check(f"{dev} gelu_bias == reference (ran {ran})", torch.allclose(y, want, atol=1e-4, rtol=1e-4))
s = ops.row_softmax(x)
check(f"{dev} row_softmax == reference", torch.allclose(s, torch.softmax(x, -1), atol=1e-5, rtol=1e-4))

g = torch.randn_like(y)
gx, gb = torch.autograd.grad(y, (x, bias), g)  # the reference's backward
rx, rb = torch.autograd.grad(want, (x, bias), g)
check(f"{dev} gelu_bias gradients == reference's", torch.allclose(gx, rx, atol=1e-4) and torch.allclose(gb, rb, atol=1e-3))

if dev == "cuda":  # the op (evolved kernel) against the reference, no autograd
    def time_us(f, iters=50):
        with torch.no_grad():
            for _ in range(3):
                f()
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            for _ in range(iters):
                f()
            end.record()
            torch.cuda.synchronize()
        return start.elapsed_time(end) * 1000 / iters

    op_us = time_us(lambda: ops.gelu_bias(x, bias))
    ref_us = time_us(lambda: torch.nn.functional.gelu(x + bias))
    print(f"INFO gelu_bias 4096x4096: op {op_us:.1f} us, reference {ref_us:.1f} us ({ref_us / op_us:.2f}x)", flush=True)

if "--compile" in sys.argv:
    if not hasattr(torch, "compile"):
        print(f"SKIP torch.compile: torch {torch.__version__} has none", flush=True)
    else:
        def block(x, bias):
            return ops.row_softmax(ops.gelu_bias(x, bias) * 2).sum()

        compiled = torch.compile(block, backend="inductor" if dev == "cuda" else "aot_eager")
        got = compiled(x, bias)
        want = torch.softmax(torch.nn.functional.gelu(x + bias) * 2, -1).sum()
        gx, gb = torch.autograd.grad(got, (x, bias))
        rx, rb = torch.autograd.grad(want, (x, bias))
        check(f"{dev} torch.compile(block) value and gradients",
              torch.allclose(got, want, rtol=1e-4) and torch.allclose(gx, rx, atol=1e-4) and torch.allclose(gb, rb, atol=1e-3))

sys.exit(1 if failures else 0)
