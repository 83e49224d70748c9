"""Loads the test project's operator library (kernelevo_torch_library(kevo_test_ops FUNCTIONS scale
pair)) and checks torch.ops.kernelevo.scale / .pair against the same functions written in Python:
values on CPU (the reference) and, where a GPU is, on CUDA (the dispatch: the cached kernel for
its architecture, else the reference), gradients (the reference's backward; gradcheck in float64)
and torch.compile where this torch has it. One line per check: PASS/FAIL/SKIP ...; exit 1 on a FAIL.

Usage: python3 torch_op_check.py <path of libkevo_test_ops.so> [--kernels sm_90,...]
  --kernels: the architectures scale has a cached kernel for: on a GPU of one of them, a CUDA call
  must run that kernel (kevo_last_impl("scale")), on another GPU the reference.
"""
import ctypes
import sys

import torch

lib = sys.argv[1]
kernels = sys.argv[sys.argv.index("--kernels") + 1].split(",") if "--kernels" in sys.argv else []
torch.ops.load_library(lib)
runtime = ctypes.CDLL(lib)  # the same loaded library: the runtime's record of what ran
runtime.kevo_last_impl.restype = ctypes.c_char_p
ops = torch.ops.kernelevo
failures = 0


def last_impl(name):
    r = runtime.kevo_last_impl(name.encode())
    return r.decode() if r else ""


def check(what, ok, detail=""):
    global failures
    print(f"{'PASS' if ok else 'FAIL'} {what}{': ' + detail if detail else ''}", flush=True)
    failures += 0 if ok else 1


def close(a, b, tol=1e-5):
    return a.shape == b.shape and torch.allclose(a, b, atol=tol, rtol=tol)


def ref_scale(x):
    return x * 2


def ref_pair(x, w):
    y = torch.tanh(x) * w
    return y, y.sum(-1)


print(f"torch {torch.__version__}, CUDA available: {torch.cuda.is_available()}", flush=True)
check("schema", "pair(Tensor x, Tensor w) -> (Tensor, Tensor)" in str(ops.pair.default._schema), str(ops.pair.default._schema))

devices = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
for dev in devices:
    torch.manual_seed(0)
    x = torch.randn(1000, device=dev)
    check(f"{dev} scale value", close(ops.scale(x), ref_scale(x)))
    impl = last_impl("scale")
    if dev == "cpu":
        # The CPU kernel is the reference itself: the dispatch is not even asked.
        check("cpu scale runs the reference", impl in ("reference", "none", ""), impl)
    else:
        arch = "sm_%d%d" % torch.cuda.get_device_capability()
        want = arch if arch in kernels else "reference"
        check(f"cuda scale on {arch} ran {want}", impl == want, impl)

    x = torch.randn(5, 7, device=dev, requires_grad=True)
    w = torch.randn(7, device=dev, requires_grad=True)
    y, s = ops.pair(x, w)
    ry, rs = ref_pair(x, w)
    check(f"{dev} pair values", close(y, ry) and close(s, rs))
    gy, gs = torch.randn_like(y), torch.randn_like(s)
    got = torch.autograd.grad((y, s), (x, w), (gy, gs))
    want = torch.autograd.grad((ry, rs), (x, w), (gy, gs))
    check(f"{dev} pair gradients equal the reference's", all(close(g, r) for g, r in zip(got, want)))
    # Only one output used; only one input asked for.
    got = torch.autograd.grad(ops.pair(x, w)[1].sum(), (w,))
    want = torch.autograd.grad(ref_pair(x, w)[1].sum(), (w,))
    check(f"{dev} pair gradient of one output for one input", close(got[0], want[0]))

    xs = torch.randn(1000, device=dev, requires_grad=True)
    ops.scale(xs).sum().backward()
    check(f"{dev} scale backward", close(xs.grad, torch.full_like(xs, 2.0)))
    with torch.no_grad():
        out = ops.scale(xs)
    check(f"{dev} scale under no_grad", not out.requires_grad and close(out, ref_scale(xs.detach())))

    if dev == "cpu":  # the Meta kernel (the reference on meta tensors) gives torch.compile the shapes
        my, ms = ops.pair(torch.empty(5, 7, device="meta"), torch.empty(7, device="meta"))
        check("meta pair shapes", my.shape == (5, 7) and ms.shape == (5,) and my.device.type == "meta")

    xd = torch.randn(3, 4, device=dev, dtype=torch.float64, requires_grad=True)
    wd = torch.randn(4, device=dev, dtype=torch.float64, requires_grad=True)
    check(f"{dev} pair gradcheck (float64)", torch.autograd.gradcheck(lambda a, b: ops.pair(a, b), (xd, wd)))

if not hasattr(torch, "compile"):
    print(f"SKIP torch.compile: torch {torch.__version__} has none (the GPU host's PyTorch 2.x runs it)", flush=True)
else:
    dev = devices[-1]
    backend = "inductor" if dev == "cuda" else "aot_eager"  # CPU inductor would need Python.h and a compiler

    def f(x, w):
        y, s = ops.pair(x, w)
        return (ops.scale(y) * 3).sum() + s.sum()

    def f_ref(x, w):
        y, s = ref_pair(x, w)
        return (ref_scale(y) * 3).sum() + s.sum()

    x = torch.randn(6, 9, device=dev, requires_grad=True)
    w = torch.randn(9, device=dev, requires_grad=True)
    for fullgraph in (False, True):
        torch._dynamo.reset()
        try:
            cf = torch.compile(f, backend=backend, fullgraph=fullgraph)
            got = cf(x, w)
            gx, gw = torch.autograd.grad(got, (x, w))
            want = f_ref(x, w)
            rx, rw = torch.autograd.grad(want, (x, w))
            ok = close(got, want, 1e-4) and close(gx, rx, 1e-4) and close(gw, rw, 1e-4)
            check(f"{dev} torch.compile(backend={backend}, fullgraph={fullgraph}) value and gradients", ok)
        except Exception as e:  # fullgraph=True is informative only: a graph break is allowed
            line = str(e).splitlines()[0] if str(e) else type(e).__name__
            if fullgraph:
                print(f"INFO torch.compile(fullgraph=True) did not trace it in one graph: {line}", flush=True)
            else:
                check(f"{dev} torch.compile(backend={backend}, fullgraph=False)", False, line)

print("PASS all" if failures == 0 else f"FAIL {failures} check(s)", flush=True)
sys.exit(1 if failures else 0)
