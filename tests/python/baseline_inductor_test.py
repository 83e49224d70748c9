"""What torch.compile runs, as tool/baseline/baseline_torch.py captures it for the prompt (issue 49 item 4):
Inductor's generated code of the first call under torch._inductor.utils.run_and_get_code, summarized (the
Triton kernels from @triton.jit on, call() without asserts, the library calls it makes, a size bound), and
why there is none where this PyTorch has no such API (PyTorch 1.x, for real) or the capture fails.
Usage: baseline_inductor_test.py [unittest args]. Exits 77 (ctest: skipped) without PyTorch."""
import importlib.util
import os
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.join(HERE, "..", "..", "tool", "baseline", "baseline_torch.py")
try:
    import torch
except ImportError:
    print("SKIP this Python has no PyTorch")
    sys.exit(77)
_spec = importlib.util.spec_from_file_location("baseline_torch", SCRIPT)
bt = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bt)

# The layout of Inductor's output module (PyTorch 2.5, a Linear + ReLU), cut to what the summary reads.
GENERATED = """# AOT ID: ['0_inference']
import torch
from torch._inductor.async_compile import AsyncCompile
aten = torch.ops.aten
assert_size_stride = torch._C._dynamo.guards.assert_size_stride
async_compile = AsyncCompile()


# kernel path: /tmp/.inductor/ab/cab.py
# Topologically Sorted Source Nodes: [relu], Original ATen: [aten.relu]
triton_poi_fused_relu_0 = async_compile.triton('triton_poi_fused_relu_0', '''
import triton
import triton.language as tl
from torch._inductor.runtime import triton_helpers, triton_heuristics

@triton_heuristics.pointwise(
    size_hints=[512], filename=__file__,
    triton_meta={'signature': {0: '*fp32', 1: '*fp32', 2: 'i32'}, 'device': 0, 'constants': {}},
)
@triton.jit
def triton_poi_fused_relu_0(in_out_ptr0, in_ptr0, xnumel, XBLOCK : tl.constexpr):
    xoffset = tl.program_id(0) * XBLOCK
    xindex = xoffset + tl.arange(0, XBLOCK)[:]
    tmp0 = tl.load(in_out_ptr0 + (xindex), None)
    tl.store(in_out_ptr0 + (xindex), tl.maximum(tmp0, 0.0), None)
''', device_str='cuda')


async_compile.wait(globals())
del async_compile

def call(args):
    primals_1, primals_2, primals_3 = args
    args.clear()
    assert_size_stride(primals_1, (32, 64), (64, 1))
    with torch.cuda._DeviceGuard(0):
        buf0 = empty_strided_cuda((16, 32), (32, 1), torch.float32)
        # Topologically Sorted Source Nodes: [linear], Original ATen: [aten.addmm]
        extern_kernels.mm(primals_3, reinterpret_tensor(primals_1, (64, 32), (1, 64), 0), out=buf0)
        del primals_1
        triton_poi_fused_relu_0.run(buf0, primals_2, 512, grid=grid(512), stream=stream0)
        extern_kernels.addmm(primals_2, buf0, primals_3, alpha=1, beta=1, out=buf1)
        extern_kernels.mm(buf1, primals_3, out=buf2)
    return (buf2, )


def benchmark_compiled_module(times=10, repeat=10):
    from torch._inductor.utils import print_performance
    return print_performance(lambda: call([]), times=times, repeat=repeat)
"""


class FakeRunAndGetCode:
    """run_and_get_code as PyTorch 2 has it: calls fn and returns (its result, the generated files)."""

    def __init__(self, sources):
        self.sources, self.calls = sources, 0

    def __call__(self, fn, *args):
        self.calls += 1
        return fn(*args), self.sources


class InductorCodeTest(unittest.TestCase):
    def test_the_summary_keeps_the_kernels_the_call_order_and_the_library_calls(self):
        fake = FakeRunAndGetCode([GENERATED])
        result, got = bt.capture_inductor(torch, lambda x: x + 1, (41,), fake)
        self.assertEqual(result, 42)  # the module's own result, from the one call that compiled it
        self.assertEqual(fake.calls, 1)
        self.assertEqual(got["kernels"], ["triton_poi_fused_relu_0"])
        self.assertEqual(got["library_calls"], ["extern_kernels.mm", "extern_kernels.addmm"])  # once each, in order
        code = got["code"]
        self.assertIn("@triton.jit\ndef triton_poi_fused_relu_0(in_out_ptr0", code)
        self.assertIn("triton_poi_fused_relu_0.run(buf0, primals_2, 512", code)
        self.assertLess(code.index("@triton.jit"), code.index("def call(args):"))
        for noise in ("triton_heuristics.pointwise", "import triton", "assert_size_stride(primals_1",
                      "del primals_1", "args.clear()", "benchmark_compiled_module", "AOT ID"):
            self.assertNotIn(noise, code)
        self.assertEqual(got["bytes"], len(code))
        self.assertNotIn("not_captured", got)

    def test_the_code_is_cut_at_its_bound_and_says_its_size(self):
        sources = [GENERATED.replace("triton_poi_fused_relu_0", "triton_poi_fused_relu_%d" % i) for i in range(200)]
        _, got = bt.capture_inductor(torch, lambda: None, (), FakeRunAndGetCode(sources))
        self.assertEqual(len(got["code"]), bt.INDUCTOR_CODE_BYTES)
        self.assertGreater(got["bytes"], bt.INDUCTOR_CODE_BYTES)
        self.assertEqual(len(got["kernels"]), 200)

    def test_an_unknown_layout_is_kept_as_it_is(self):
        _, got = bt.capture_inductor(torch, lambda: 1, (), FakeRunAndGetCode(["x = torch.ops.foo.bar(y)\n"]))
        self.assertEqual(got["code"], "x = torch.ops.foo.bar(y)\n")
        self.assertEqual((got["kernels"], got["library_calls"]), ([], []))

    def test_a_failed_capture_calls_the_module_plainly_and_says_why(self):
        def broken(fn, *args):
            raise RuntimeError("GraphLowering has no save_output_code")
        calls = []
        result, got = bt.capture_inductor(torch, lambda x: calls.append(x) or 7, (3,), broken)
        self.assertEqual((result, calls), (7, [3]))
        self.assertEqual(got, {"not_captured": "run_and_get_code failed: RuntimeError: "
                                               "GraphLowering has no save_output_code"})
        _, got = bt.capture_inductor(torch, lambda: 7, (), FakeRunAndGetCode([]))
        self.assertEqual(got, {"not_captured": "run_and_get_code failed: ValueError: it returned no generated source"})

    @unittest.skipIf(hasattr(torch, "compile"), "this PyTorch has torch.compile")
    def test_without_inductor_the_module_runs_and_the_reason_names_this_pytorch(self):
        result, got = bt.capture_inductor(torch, lambda x: x * 2, (torch.ones(2),))
        self.assertTrue(torch.equal(result, torch.full((2,), 2.0)))
        self.assertEqual(list(got), ["not_captured"])
        self.assertTrue(got["not_captured"].startswith(
            "PyTorch %s has no torch._inductor.utils.run_and_get_code (" % torch.__version__), got)

    @unittest.skipUnless(hasattr(torch, "compile"), "this PyTorch has no torch.compile")
    def test_with_inductor_the_real_capture_has_its_call(self):
        compiled = torch.compile(lambda x: torch.relu(x) + 1)
        result, got = bt.capture_inductor(torch, compiled, (torch.randn(64),))
        self.assertEqual(tuple(result.shape), (64,))
        self.assertIn("def call(", got.get("code", ""), got)


if __name__ == "__main__":
    unittest.main()
