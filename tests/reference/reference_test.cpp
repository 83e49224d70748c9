// The reference wrapper (tool/reference/reference.cpp): correctness (kevo_ref_forward) runs the
// reference in strict fp32, TF32 off for cuDNN and cuBLAS and restored after; the speed baseline
// (kevo_ref_call) keeps LibTorch's defaults; kevo_ref_precision says what those defaults are;
// kevo_ref_call_strict is the speed baseline in strict fp32 (timed too where the defaults differ).
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "common/fs.h"
#include "kernelevo/abi.h"
#include "reference/reference.h"
#include "task/task.h"

using namespace kevo;

namespace {

Task probe_task(const TempDir& d) {
    // The reference records the TF32 settings it runs under: 2 for cuDNN, 1 for cuBLAS.
    write_file_atomic(d.path() / "probe.cpp",
                      "#include <ATen/ATen.h>\n"
                      "extern \"C\" __attribute__((visibility(\"default\"))) int kevo_probe_seen = -1;\n"
                      "at::Tensor probe(const at::Tensor& x) {\n"
                      "    kevo_probe_seen = (at::globalContext().allowTF32CuDNN() ? 2 : 0) +\n"
                      "                      (at::globalContext().allowTF32CuBLAS() ? 1 : 0);\n"
                      "    return x * 2;\n"
                      "}\n");
    nlohmann::json j = nlohmann::json::parse(R"({"name": "probe", "reference": {"source": "probe.cpp", "function": "probe"},
        "inputs": [{"name": "x", "dtype": "float32", "shape": [4]}], "outputs": [{"name": "y", "dtype": "float32", "shape": [4]}]})");
    return parse_task(j, d.path() / "task.json");
}

// The text of the generated function `name`, up to the next exported entry point.
std::string body_of(const std::string& src, const std::string& name) {
    size_t at = src.find(name + "(");
    if (at == std::string::npos) return "";
    size_t end = src.find("extern \"C\"", at);
    return src.substr(at, end == std::string::npos ? std::string::npos : end - at);
}

TEST(ReferenceWrapper, StrictFp32GuardsCorrectnessOnlyInTheSource) {
    TempDir d("kevo-ref-test");
    const std::string src = reference_wrapper_source(probe_task(d));
    const std::string forward = body_of(src, "kevo_ref_forward"), call = body_of(src, "kevo_ref_call");
    ASSERT_FALSE(forward.empty());
    ASSERT_FALSE(call.empty());
    EXPECT_NE(forward.find("StrictFp32 strict;"), std::string::npos) << forward;
    EXPECT_EQ(call.find("StrictFp32"), std::string::npos) << call;
    const std::string strict = body_of(src, "kevo_ref_call_strict");
    EXPECT_NE(strict.find("StrictFp32 strict;"), std::string::npos) << strict;
    EXPECT_NE(strict.find("return kevo_ref_call(in, n_in, stream);"), std::string::npos) << strict;
    EXPECT_NE(src.find("setAllowTF32CuDNN(false)"), std::string::npos);
    EXPECT_NE(src.find("setAllowTF32CuBLAS(false)"), std::string::npos);
    EXPECT_NE(src.find("kevo_ref_precision(void)"), std::string::npos);
}

// Built and run (on the CPU here; the settings are LibTorch's global context either way).
TEST(ReferenceWrapper, ForwardAndStrictCallRunInStrictFp32AndCallKeepsTheDefaults) {
    if (!reference_support().available) GTEST_SKIP() << "built without LibTorch";
    if (reference_support().cuda) GTEST_SKIP() << "LibTorch with CUDA: the CPU tensors here would not do";
    TempDir d("kevo-ref-test");
    ReferenceBuild b = build_reference(probe_task(d));
    ASSERT_TRUE(b.ok) << b.log;
    void* lib = dlopen(b.library.c_str(), RTLD_NOW | RTLD_LOCAL);
    ASSERT_NE(lib, nullptr) << dlerror();
    auto precision = reinterpret_cast<const char* (*)(void)>(dlsym(lib, "kevo_ref_precision"));
    auto forward = reinterpret_cast<int (*)(const kevo_tensor*, int, kevo_tensor*, int, cudaStream_t)>(dlsym(lib, "kevo_ref_forward"));
    auto call = reinterpret_cast<int (*)(const kevo_tensor*, int, cudaStream_t)>(dlsym(lib, "kevo_ref_call"));
    auto call_strict = reinterpret_cast<int (*)(const kevo_tensor*, int, cudaStream_t)>(dlsym(lib, "kevo_ref_call_strict"));
    auto release = reinterpret_cast<void (*)(void)>(dlsym(lib, "kevo_ref_release"));
    auto* seen = static_cast<int*>(dlsym(lib, "kevo_probe_seen"));
    ASSERT_TRUE(precision && forward && call && call_strict && release && seen);
    // LibTorch's defaults (1.13 and 2.x): TF32 convolutions, strict fp32 matmuls.
    EXPECT_STREQ(precision(), "cuDNN TF32 on, cuBLAS TF32 off");

    std::vector<float> x = {1, 2, 3, 4}, y(4, 0);
    kevo_tensor in{x.data(), 1, KEVO_FLOAT32, {4}, {1}}, out{y.data(), 1, KEVO_FLOAT32, {4}, {1}};
    ASSERT_EQ(forward(&in, 1, &out, 1, nullptr), 0);
    EXPECT_EQ(*seen, 0) << "correctness ran with TF32 on";
    EXPECT_EQ(y, (std::vector<float>{2, 4, 6, 8}));
    ASSERT_EQ(call(&in, 1, nullptr), 0);
    EXPECT_EQ(*seen, 2) << "the speed baseline did not run with LibTorch's defaults (restored after forward)";
    release();
    // The strict speed baseline: strict fp32 during the call, the defaults restored after it.
    *seen = -1;
    ASSERT_EQ(call_strict(&in, 1, nullptr), 0);
    EXPECT_EQ(*seen, 0) << "the strict fp32 speed baseline ran with TF32 on";
    release();
    ASSERT_EQ(call(&in, 1, nullptr), 0);
    EXPECT_EQ(*seen, 2) << "kevo_ref_call_strict did not restore LibTorch's defaults";
    release();
    // A wrong count fails through kevo_ref_error, as kevo_ref_call does.
    auto error = reinterpret_cast<const char* (*)(void)>(dlsym(lib, "kevo_ref_error"));
    ASSERT_NE(error, nullptr);
    EXPECT_EQ(call_strict(&in, 2, nullptr), 1);
    EXPECT_NE(std::string(error()).find("wrong number of inputs"), std::string::npos) << error();
    ASSERT_EQ(call(&in, 1, nullptr), 0);
    EXPECT_EQ(*seen, 2) << "a failed strict call left TF32 off";
    release();
    EXPECT_STREQ(precision(), "cuDNN TF32 on, cuBLAS TF32 off");
    dlclose(lib);
}

}  // namespace
