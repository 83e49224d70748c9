// The reference wrapper (tool/reference/reference.cpp): correctness (kevo_ref_forward) runs the
// reference in strict fp32, TF32 off for cuDNN and cuBLAS and restored after; the speed baseline
// (kevo_ref_call) runs under the task's precision policy (task.json "precision": pytorch by default,
// PyTorch's own flags), kevo_ref_forward_policy gives its outputs, kevo_ref_precision says which
// policy and flags; kevo_ref_call_strict is the speed baseline in strict fp32.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <tuple>
#include <string>
#include <vector>

#include "common/fs.h"
#include "kernelevo/abi.h"
#include "reference/reference.h"
#include "task/task.h"

using namespace kevo;

namespace {

// `precision`: task.json's "precision" (null: none, the default).
Task probe_task(const TempDir& d, const nlohmann::json& precision = nullptr) {
    // The reference records the TF32 settings it runs under: 2 for cuDNN, 1 for cuBLAS; the same
    // sum of the process's settings outside any entry point is kevo_probe_flags().
    write_file_atomic(d.path() / "probe.cpp",
                      "#include <ATen/ATen.h>\n"
                      "extern \"C\" __attribute__((visibility(\"default\"))) int kevo_probe_seen = -1;\n"
                      "extern \"C\" __attribute__((visibility(\"default\"))) int kevo_probe_flags() {\n"
                      "    return (at::globalContext().allowTF32CuDNN() ? 2 : 0) + (at::globalContext().allowTF32CuBLAS() ? 1 : 0);\n"
                      "}\n"
                      "at::Tensor probe(const at::Tensor& x) {\n"
                      "    kevo_probe_seen = kevo_probe_flags();\n"
                      "    return x * 2;\n"
                      "}\n");
    nlohmann::json j = nlohmann::json::parse(R"({"name": "probe", "reference": {"source": "probe.cpp", "function": "probe"},
        "inputs": [{"name": "x", "dtype": "float32", "shape": [4]}], "outputs": [{"name": "y", "dtype": "float32", "shape": [4]}]})");
    if (!precision.is_null()) j["precision"] = precision;
    return parse_task(j, d.path() / "task.json");
}

// The text of the generated function `name`, up to the next exported entry point.
std::string body_of(const std::string& src, const std::string& name) {
    size_t at = src.find(name + "(");
    if (at == std::string::npos) return "";
    size_t end = src.find("extern \"C\"", at);
    return src.substr(at, end == std::string::npos ? std::string::npos : end - at);
}

TEST(ReferenceWrapper, StrictFp32ForCorrectnessAndThePolicyForTimingInTheSource) {
    TempDir d("kevo-ref-test");
    const std::string src = reference_wrapper_source(probe_task(d));
    const std::string forward = body_of(src, "kevo_ref_forward"), call = body_of(src, "kevo_ref_call");
    ASSERT_FALSE(forward.empty());
    ASSERT_FALSE(call.empty());
    EXPECT_NE(forward.find("forward_into<kevo_ref_detail::StrictFp32>"), std::string::npos) << forward;
    EXPECT_NE(call.find("call_kept<kevo_ref_detail::PolicyTf32>"), std::string::npos) << call;
    EXPECT_NE(body_of(src, "kevo_ref_call_strict").find("call_kept<kevo_ref_detail::StrictFp32>"), std::string::npos);
    EXPECT_NE(body_of(src, "kevo_ref_forward_policy").find("forward_into<kevo_ref_detail::PolicyTf32>"), std::string::npos);
    EXPECT_NE(src.find("StrictFp32() : Tf32Scope(false, false)"), std::string::npos);
    EXPECT_NE(src.find("kevo_ref_precision(void)"), std::string::npos);
    // The default policy (pytorch): PyTorch's own flags. strict and tf32 set their own.
    EXPECT_NE(src.find("#define KEVO_REF_POLICY \"pytorch\"\n#define KEVO_REF_CUDNN_TF32 1\n#define KEVO_REF_CUBLAS_TF32 0\n"), std::string::npos);
    const std::string strict = reference_wrapper_source(probe_task(d, "strict"));
    EXPECT_NE(strict.find("#define KEVO_REF_POLICY \"strict\"\n#define KEVO_REF_CUDNN_TF32 0\n#define KEVO_REF_CUBLAS_TF32 0\n"), std::string::npos);
    const std::string tf32 = reference_wrapper_source(probe_task(d, "tf32"));
    EXPECT_NE(tf32.find("#define KEVO_REF_CUDNN_TF32 1\n#define KEVO_REF_CUBLAS_TF32 1\n"), std::string::npos);
}

struct Probe {
    void* lib = nullptr;
    const char* (*precision)(void) = nullptr;
    int (*forward)(const kevo_tensor*, int, kevo_tensor*, int, cudaStream_t) = nullptr;
    int (*forward_policy)(const kevo_tensor*, int, kevo_tensor*, int, cudaStream_t) = nullptr;
    int (*call)(const kevo_tensor*, int, cudaStream_t) = nullptr;
    int (*call_strict)(const kevo_tensor*, int, cudaStream_t) = nullptr;
    void (*release)(void) = nullptr;
    const char* (*error)(void) = nullptr;
    int (*flags)(void) = nullptr;
    int* seen = nullptr;
    template <class F>
    void sym(F& f, const char* name) { f = reinterpret_cast<F>(dlsym(lib, name)); }
    explicit Probe(const Task& task) {
        ReferenceBuild b = build_reference(task);
        EXPECT_TRUE(b.ok) << b.log;
        if (!b.ok) return;
        lib = dlopen(b.library.c_str(), RTLD_NOW | RTLD_LOCAL);
        EXPECT_NE(lib, nullptr) << dlerror();
        if (!lib) return;
        sym(precision, "kevo_ref_precision"), sym(forward, "kevo_ref_forward"), sym(forward_policy, "kevo_ref_forward_policy");
        sym(call, "kevo_ref_call"), sym(call_strict, "kevo_ref_call_strict"), sym(release, "kevo_ref_release");
        sym(error, "kevo_ref_error"), sym(flags, "kevo_probe_flags");
        seen = static_cast<int*>(dlsym(lib, "kevo_probe_seen"));
    }
    bool ok() const { return precision && forward && forward_policy && call && call_strict && release && error && flags && seen; }
    ~Probe() {
        if (lib) dlclose(lib);
    }
};

bool have_cpu_libtorch() { return reference_support().available && !reference_support().cuda; }

// Built and run (on the CPU here; the settings are LibTorch's global context either way).
TEST(ReferenceWrapper, ForwardAndStrictCallRunInStrictFp32AndCallRunsThePolicy) {
    if (!have_cpu_libtorch()) GTEST_SKIP() << "needs LibTorch without CUDA (the CPU tensors here)";
    TempDir d("kevo-ref-test");
    Probe p(probe_task(d));
    ASSERT_TRUE(p.ok());
    // The default policy: PyTorch's and LibTorch's defaults (1.13 and 2.x): TF32 convolutions, fp32 matmuls.
    EXPECT_STREQ(p.precision(), "pytorch (cuDNN TF32 on, cuBLAS TF32 off)");
    const int outside = p.flags();

    std::vector<float> x = {1, 2, 3, 4}, y(4, 0);
    kevo_tensor in{x.data(), 1, KEVO_FLOAT32, {4}, {1}}, out{y.data(), 1, KEVO_FLOAT32, {4}, {1}};
    ASSERT_EQ(p.forward(&in, 1, &out, 1, nullptr), 0);
    EXPECT_EQ(*p.seen, 0) << "correctness ran with TF32 on";
    EXPECT_EQ(y, (std::vector<float>{2, 4, 6, 8}));
    ASSERT_EQ(p.forward_policy(&in, 1, &out, 1, nullptr), 0);
    EXPECT_EQ(*p.seen, 2) << "the policy's outputs were not computed under the policy";
    ASSERT_EQ(p.call(&in, 1, nullptr), 0);
    EXPECT_EQ(*p.seen, 2) << "the speed baseline did not run with the policy's flags";
    p.release();
    *p.seen = -1;
    ASSERT_EQ(p.call_strict(&in, 1, nullptr), 0);
    EXPECT_EQ(*p.seen, 0) << "the strict fp32 speed baseline ran with TF32 on";
    p.release();
    EXPECT_EQ(p.flags(), outside) << "an entry point left the process's TF32 flags changed";
    // A wrong count fails through kevo_ref_error and leaves the flags as they were.
    EXPECT_EQ(p.call_strict(&in, 2, nullptr), 1);
    EXPECT_NE(std::string(p.error()).find("wrong number of inputs"), std::string::npos) << p.error();
    EXPECT_EQ(p.flags(), outside) << "a failed strict call left TF32 changed";
    ASSERT_EQ(p.call(&in, 1, nullptr), 0);
    EXPECT_EQ(*p.seen, 2);
    p.release();
}

// Each policy's flags reach the timed call: tf32 turns both on; a pytorch task records the flags its
// user's code sets (here cuDNN TF32 off, matmul TF32 on, i.e. set_float32_matmul_precision("high")).
TEST(ReferenceWrapper, TimedCallFollowsEachPolicyAndCorrectnessStaysStrict) {
    if (!have_cpu_libtorch()) GTEST_SKIP() << "needs LibTorch without CUDA (the CPU tensors here)";
    const std::vector<std::tuple<nlohmann::json, int, std::string>> cases = {
        {"tf32", 3, "tf32 (cuDNN TF32 on, cuBLAS TF32 on)"},
        {{{"policy", "pytorch"}, {"cudnn_tf32", false}, {"matmul_tf32", true}}, 1, "pytorch (cuDNN TF32 off, cuBLAS TF32 on)"},
    };
    for (const auto& [precision, flags, text] : cases) {
        TempDir d("kevo-ref-test");
        Probe p(probe_task(d, precision));
        ASSERT_TRUE(p.ok()) << precision;
        EXPECT_EQ(p.precision(), text);
        std::vector<float> x = {1, 2, 3, 4}, y(4, 0);
        kevo_tensor in{x.data(), 1, KEVO_FLOAT32, {4}, {1}}, out{y.data(), 1, KEVO_FLOAT32, {4}, {1}};
        ASSERT_EQ(p.call(&in, 1, nullptr), 0);
        EXPECT_EQ(*p.seen, flags) << precision;
        p.release();
        ASSERT_EQ(p.forward(&in, 1, &out, 1, nullptr), 0);
        EXPECT_EQ(*p.seen, 0) << precision << ": correctness ran with TF32 on";
    }
}

}  // namespace
