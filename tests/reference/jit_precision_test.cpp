// The imported tasks' generic TorchScript reference (tool/kernelbench/jit_reference.cpp) under the
// precision policy: torch.jit.trace bakes the tracing process's cuDNN flags into
// aten::_convolution (allow_tf32=False under the importer's strict fp32), so the loader replaces
// those nodes by aten::convolution, which reads the flags at each call: the timed reference then
// runs the policy and correctness stays strict. The trace is made by the PyTorch found at run time
// (KEVO_TEST_PYTHON, python3, /usr/bin/python3; skipped without one).
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <string>
#include <vector>

#include "common/fs.h"
#include "common/process.h"
#include "kernelevo/abi.h"
#include "reference/reference.h"
#include "task/task.h"

using namespace kevo;

namespace {

// A model with a convolution in a submodule and a functional one, traced with TF32 off (as the
// importer does), saved as model.pt with its inputs and eager outputs as raw float32 files.
const char* kTrace = R"PY(
import sys, torch
from torch import nn
class M(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(64, 128, 3)
    def forward(self, x, w):
        # Scaled before tanh: unscaled, the outputs are about 20 and tanh saturates to exactly +-1,
        # hiding TF32's rounding. Channels large enough that cuDNN picks tensor-core algorithms: on the
        # H200 a 16->32 channel 24x24 version gave identical outputs with TF32 on and off in eager PyTorch.
        return (0.02 * torch.nn.functional.conv2d(self.conv(x), w)).tanh()
torch.manual_seed(0)
torch.backends.cudnn.allow_tf32 = False
dev = sys.argv[2]
m = M().eval().to(dev)
x, w = torch.randn(8, 64, 32, 32, device=dev), torch.randn(32, 128, 3, 3, device=dev)
with torch.no_grad():
    traced = torch.jit.trace(m, (x, w))
    y = m(x, w)
assert "aten::_convolution" in str(traced.graph) or "aten::_convolution" in str(traced.conv.graph)
traced.save(sys.argv[1] + "/model.pt")
out = [("x", x), ("w", w), ("y", y)]
if dev == "cuda":  # what PyTorch eager gives with cuDNN's TF32 on (its default), for the policy's run
    torch.backends.cudnn.allow_tf32 = True
    with torch.no_grad():
        out.append(("y_tf32", m(x, w)))
for name, t in out:
    t.detach().cpu().contiguous().numpy().tofile(sys.argv[1] + "/" + name + ".bin")
)PY";

std::string python_with_torch() {
    std::vector<std::string> candidates;
    if (const char* p = std::getenv("KEVO_TEST_PYTHON")) candidates.push_back(p);
    candidates.insert(candidates.end(), {"python3", "/usr/bin/python3"});
    for (const auto& py : candidates) {
        ProcessOptions o;
        o.argv = {py, "-c", "import torch"};
        o.timeout_s = 120;
        if (run_process(o).ok()) return py;
    }
    return "";
}

std::vector<float> floats(const fs::path& f) {
    const std::string bytes = read_file(f);
    std::vector<float> v(bytes.size() / sizeof(float));
    std::memcpy(v.data(), bytes.data(), v.size() * sizeof(float));
    return v;
}

// The generic reference, plus a probe counting the aten::_convolution nodes left in the loaded module.
Task jit_task(const TempDir& d, const std::string& precision) {
    write_file_atomic(d.path() / "probe_jit.cpp",
                      "#include \"" + (fs::path(KEVO_SOURCE_DIR) / "tool" / "kernelbench" / "jit_reference.cpp").string() + "\"\n"
                      "static int kevo_count(torch::jit::Block* b) {\n"
                      "    int n = 0;\n"
                      "    for (auto* node : b->nodes()) {\n"
                      "        for (auto* bb : node->blocks()) n += kevo_count(bb);\n"
                      "        n += node->kind() == c10::Symbol::fromQualString(\"aten::_convolution\");\n"
                      "    }\n"
                      "    return n;\n"
                      "}\n"
                      "extern \"C\" __attribute__((visibility(\"default\"))) int kevo_probe_traced_convolutions() {\n"
                      "    int n = 0;\n"
                      "    for (const auto& s : kevo_kb::detail::module()->modules())\n"
                      "        for (const auto& m : s.get_methods()) n += kevo_count(m.graph()->block());\n"
                      "    return n;\n"
                      "}\n");
    nlohmann::json j = {{"name", "jit"},
                        {"reference", {{"source", "probe_jit.cpp"}, {"function", "kevo_kb::forward"}, {"signature", "vector"},
                                       {"setup", "kevo_kb::setup"}, {"arg", "model.pt"}}},
                        {"inputs", {{{"name", "x"}, {"dtype", "float32"}, {"shape", {8, 64, 32, 32}}},
                                    {{"name", "w"}, {"dtype", "float32"}, {"shape", {32, 128, 3, 3}}}}},
                        {"outputs", {{{"name", "y"}, {"dtype", "float32"}, {"shape", {8, 32, 28, 28}}}}},
                        {"precision", precision}};
    return parse_task(j, d.path() / "task.json");
}

struct JitReference {
    void* lib = nullptr;
    int (*setup)(const char*) = nullptr;
    int (*forward)(const kevo_tensor*, int, kevo_tensor*, int, cudaStream_t) = nullptr;
    int (*forward_policy)(const kevo_tensor*, int, kevo_tensor*, int, cudaStream_t) = nullptr;
    int (*traced_convolutions)() = nullptr;
    const char* (*error)() = nullptr;
    explicit JitReference(const Task& t) {
        ReferenceBuild b = build_reference(t);
        EXPECT_TRUE(b.ok) << b.log;
        if (b.ok) lib = dlopen(b.library.c_str(), RTLD_NOW | RTLD_LOCAL);
        if (!lib) return;
        setup = reinterpret_cast<decltype(setup)>(dlsym(lib, "kevo_ref_setup"));
        forward = reinterpret_cast<decltype(forward)>(dlsym(lib, "kevo_ref_forward"));
        forward_policy = reinterpret_cast<decltype(forward_policy)>(dlsym(lib, "kevo_ref_forward_policy"));
        traced_convolutions = reinterpret_cast<decltype(traced_convolutions)>(dlsym(lib, "kevo_probe_traced_convolutions"));
        error = reinterpret_cast<decltype(error)>(dlsym(lib, "kevo_ref_error"));
    }
    bool ok() const { return setup && forward && forward_policy && traced_convolutions && error; }
};

kevo_tensor tensor(void* data, std::vector<int64_t> sizes) {
    kevo_tensor t{};
    t.data = data;
    t.dtype = KEVO_FLOAT32;
    t.ndim = static_cast<int32_t>(sizes.size());
    int64_t stride = 1;
    for (int i = t.ndim - 1; i >= 0; --i) t.sizes[i] = sizes[i], t.strides[i] = stride, stride *= sizes[i];
    return t;
}

// On the CPU (where TF32 does not exist): the traced convolutions are gone after setup and the
// reference still computes what eager PyTorch computed.
TEST(JitReferencePrecision, TracedConvolutionsFollowTheProcessFlags) {
    if (!reference_support().available) GTEST_SKIP() << "built without LibTorch";
    if (reference_support().cuda) GTEST_SKIP() << "LibTorch with CUDA: JitReferencePrecisionGpu covers it";
    const std::string py = python_with_torch();
    if (py.empty()) GTEST_SKIP() << "no python3 with torch to trace the model";
    TempDir d("kevo-jit-precision");
    ProcessOptions o;
    o.argv = {py, "-c", kTrace, d.path().string(), "cpu"};
    o.timeout_s = 300;
    ProcessResult traced = run_process(o);
    ASSERT_TRUE(traced.ok()) << traced.out << traced.err;
    JitReference ref(jit_task(d, "pytorch"));
    ASSERT_TRUE(ref.ok());
    ASSERT_EQ(ref.setup((d.path() / "model.pt").c_str()), 0) << ref.error();
    EXPECT_EQ(ref.traced_convolutions(), 0) << "aten::_convolution (flags baked at trace time) is still in the graph";
    std::vector<float> x = floats(d.path() / "x.bin"), w = floats(d.path() / "w.bin"), want = floats(d.path() / "y.bin");
    std::vector<float> y(want.size()), yp(want.size());
    kevo_tensor in[2] = {tensor(x.data(), {8, 64, 32, 32}), tensor(w.data(), {32, 128, 3, 3})};
    kevo_tensor out = tensor(y.data(), {8, 32, 28, 28}), out_p = tensor(yp.data(), {8, 32, 28, 28});
    ASSERT_EQ(ref.forward(in, 2, &out, 1, nullptr), 0) << ref.error();
    ASSERT_EQ(ref.forward_policy(in, 2, &out_p, 1, nullptr), 0) << ref.error();
    EXPECT_EQ(y, want) << "the rewritten graph computes something else than eager PyTorch";
    EXPECT_EQ(yp, want);
}

// On the GPU: a conv task under "pytorch" runs the timed reference with cuDNN TF32 on (its outputs
// move away from strict fp32 by TF32's rounding), while the expected outputs (kevo_ref_forward) stay
// strict fp32 (equal to eager PyTorch with TF32 off, and to a "strict" task's policy outputs).
// Skips without a CUDA device and a CUDA LibTorch; run on the H200.
TEST(JitReferencePrecisionGpu, PytorchPolicyTimesTf32ConvolutionsAndExpectedOutputsStayStrict) {
    int devices = 0;
    if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) GTEST_SKIP() << "no CUDA device";
    if (!reference_support().cuda) GTEST_SKIP() << "LibTorch without CUDA";
    const std::string py = python_with_torch();
    if (py.empty()) GTEST_SKIP() << "no python3 with torch to trace the model";
    TempDir d("kevo-jit-precision");
    ProcessOptions o;
    o.argv = {py, "-c", kTrace, d.path().string(), "cuda"};
    o.timeout_s = 300;
    ProcessResult traced = run_process(o);
    ASSERT_TRUE(traced.ok()) << traced.out << traced.err;
    std::vector<float> x = floats(d.path() / "x.bin"), w = floats(d.path() / "w.bin"), want = floats(d.path() / "y.bin");
    void *dx = nullptr, *dw = nullptr, *dy = nullptr;
    ASSERT_EQ(cudaMalloc(&dx, x.size() * 4), cudaSuccess);
    ASSERT_EQ(cudaMalloc(&dw, w.size() * 4), cudaSuccess);
    ASSERT_EQ(cudaMalloc(&dy, want.size() * 4), cudaSuccess);
    cudaMemcpy(dx, x.data(), x.size() * 4, cudaMemcpyHostToDevice);
    cudaMemcpy(dw, w.data(), w.size() * 4, cudaMemcpyHostToDevice);
    kevo_tensor in[2] = {tensor(dx, {8, 64, 32, 32}), tensor(dw, {32, 128, 3, 3})};
    kevo_tensor out = tensor(dy, {8, 32, 28, 28});
    auto run = [&](int (*f)(const kevo_tensor*, int, kevo_tensor*, int, cudaStream_t), const char* (*error)()) {
        std::vector<float> y(want.size());
        EXPECT_EQ(f(in, 2, &out, 1, nullptr), 0) << error();
        cudaDeviceSynchronize();
        cudaMemcpy(y.data(), dy, y.size() * 4, cudaMemcpyDeviceToHost);
        return y;
    };
    const std::vector<float> eager_tf32 = floats(d.path() / "y_tf32.bin");
    auto max_diff = [&](const std::vector<float>& a, const std::vector<float>& b) {
        double m = 0;
        for (size_t i = 0; i < a.size(); ++i) m = std::max(m, std::fabs(double(a[i]) - b[i]));
        return m;
    };
    const double eager_tf32_diff = max_diff(eager_tf32, want);
    ASSERT_GT(eager_tf32_diff, 1e-5) << "PyTorch eager with cuDNN TF32 on gives strict fp32's outputs here: the model cannot tell the two apart";
    JitReference pytorch(jit_task(d, "pytorch"));
    ASSERT_TRUE(pytorch.ok());
    ASSERT_EQ(pytorch.setup((d.path() / "model.pt").c_str()), 0) << pytorch.error();
    EXPECT_EQ(pytorch.traced_convolutions(), 0);
    const std::vector<float> expected = run(pytorch.forward, pytorch.error), policy = run(pytorch.forward_policy, pytorch.error);
    const double strict_diff = max_diff(expected, want), policy_diff = max_diff(policy, want);
    const double policy_to_tf32 = max_diff(policy, eager_tf32);
    std::cout << "max |diff| from eager strict fp32: expected outputs " << strict_diff << ", pytorch policy (TF32 conv) " << policy_diff
              << ", PyTorch eager with TF32 " << eager_tf32_diff << "; pytorch policy from eager TF32 " << policy_to_tf32 << "\n";
    EXPECT_LT(policy_to_tf32, policy_diff) << "the pytorch policy's outputs are not closer to PyTorch eager's (TF32) than to strict fp32";
    EXPECT_LT(strict_diff, 1e-4) << "the expected outputs are not strict fp32";
    EXPECT_GT(policy_diff, 10 * strict_diff + 1e-5) << "the pytorch policy's reference did not run its convolutions in TF32";
    cudaFree(dx), cudaFree(dw), cudaFree(dy);
}

}  // namespace
