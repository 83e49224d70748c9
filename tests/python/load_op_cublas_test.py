"""load_op() of a cached kernel that calls cuBLAS with the caller's handle (kernel ABI version 2,
kernelevo/abi.h; issue 38 item 4): `kernelevo cache add` validates tests/python/linear_gelu_cublas.cu
(cublasSgemm + a bias-GELU kernel) for pyhelper_test.py's Linear(64, 32) + GELU through the runner's
handle, and load_op() compiles it with its glue (kernelevo/cublas_host.h, -lcublas -lcublasLt) and
gives the module's outputs. Usage: load_op_cublas_test.py KERNELEVO. Exits 77 (skipped) without
PyTorch; the test skips without a CUDA device."""
import os
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "python"))
sys.path.insert(0, HERE)
try:
    import torch
except ImportError:
    print("SKIP this Python has no PyTorch")
    sys.exit(77)
import kernelevo  # noqa: E402
from pyhelper_test import trained_block  # noqa: E402

KERNELEVO = None


@unittest.skipUnless(torch.cuda.is_available(), "no CUDA device")
class LoadOpCublas(unittest.TestCase):
    def test_a_kernel_calling_cublas_runs_as_an_op(self):
        d = tempfile.mkdtemp(prefix="kevo-cublas-op-")
        model = trained_block().eval().cuda()
        x = torch.randn(8, 64, device="cuda")
        task_json = kernelevo.export_task(model, (x,), d, name="block_cublas", quiet=True)
        major, minor = torch.cuda.get_device_capability()
        p = subprocess.run([KERNELEVO, "cache", "add", "--task", task_json, "--kernel", os.path.join(HERE, "linear_gelu_cublas.cu"),
                            "--arch", "sm_%d%d" % (major, minor), "--cache-dir", os.path.join(d, "kernels"), "-q"],
                           capture_output=True, text=True)
        print("cache add rc=%d: %s %s" % (p.returncode, p.stdout.strip()[-400:], p.stderr.strip()[-400:]))
        self.assertEqual(p.returncode, 0)  # validated by the runner with its own cuBLAS handle
        op = kernelevo.load_op(os.path.dirname(task_json), kernelevo=KERNELEVO, verbose=False)
        self.assertIsNotNone(op.kernel, op.reason)
        with torch.no_grad():
            y = op(x)
            ref = model(x)
            out = [torch.empty(8, 32, device="cuda")]
            op._op([x] + op._weights_on(x.device), out)  # the compiled kernel itself, through cuBLAS
        diff = (y - ref).abs().max().item()
        print("INFO cuBLAS kernel op vs module: max |diff| %.3g" % diff)
        self.assertTrue(torch.equal(y, out[0]))
        self.assertTrue(torch.allclose(y, ref, atol=1e-4, rtol=1e-4))
        # A second stream gets its own workspace; the handle follows the current stream.
        s = torch.cuda.Stream()
        with torch.cuda.stream(s), torch.no_grad():
            y2 = op(x)
        s.synchronize()
        self.assertTrue(torch.allclose(y2, ref, atol=1e-4, rtol=1e-4))


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit("usage: load_op_cublas_test.py KERNELEVO [unittest args]")
    KERNELEVO = os.path.abspath(sys.argv.pop(1))
    unittest.main(verbosity=2)
