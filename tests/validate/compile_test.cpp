// Compiling candidates through a real nvcc: success, verbatim errors, the content-hash cache.
#include <gtest/gtest.h>

#include "common/fs.h"
#include "compile/compile.h"
#include "common/error.h"

using namespace kevo;

namespace {
std::string fixture(const std::string& name) { return read_file(fs::path(KEVO_TEST_DATA_DIR) / "gelu_bias" / "kernels" / name); }
CompileOptions options(const fs::path& cache) {
    CompileOptions o;
    o.arch = "sm_90";
    o.cache_dir = cache;
    return o;
}
}  // namespace

TEST(Compile, GoodKernelBuildsAndIsCachedByContent) {
    TempDir cache("kevo-test-cache");
    CompileResult first = compile_kernel(fixture("good.cu"), options(cache.path()));
    ASSERT_TRUE(first.ok) << first.log;
    EXPECT_FALSE(first.cached);
    EXPECT_TRUE(fs::exists(first.library));
    CompileResult second = compile_kernel(fixture("good.cu"), options(cache.path()));
    ASSERT_TRUE(second.ok);
    EXPECT_TRUE(second.cached);
    EXPECT_EQ(second.library, first.library);
    // A different architecture is a different build.
    CompileOptions o80 = options(cache.path());
    o80.arch = "sm_80";
    CompileResult other = compile_kernel(fixture("good.cu"), o80);
    ASSERT_TRUE(other.ok) << other.log;
    EXPECT_NE(other.source_hash, first.source_hash);
}

TEST(Compile, ErrorsComeBackVerbatimWithoutTempPaths) {
    TempDir cache("kevo-test-cache");
    CompileResult r = compile_kernel(fixture("compile_error.cu"), options(cache.path()));
    EXPECT_FALSE(r.ok);
    EXPECT_NE(r.log.find("kernel.cu(4): error"), std::string::npos) << r.log;
    EXPECT_NE(r.log.find("undefined_function"), std::string::npos) << r.log;
    EXPECT_EQ(r.log.find("/tmp/"), std::string::npos) << r.log;
    // The failure is cached too: the same source gives the same answer without a recompile.
    CompileResult again = compile_kernel(fixture("compile_error.cu"), options(cache.path()));
    EXPECT_FALSE(again.ok);
    EXPECT_TRUE(again.cached);
    EXPECT_EQ(again.log, r.log);
}

TEST(Compile, CandidatesSeeTheAbiHeaderWithoutAnyIncludePathSetUp) {
    TempDir cache("kevo-test-cache");
    CompileResult r = compile_kernel("#include <kernelevo/abi.h>\nstatic_assert(KEVO_ABI_VERSION >= 1, \"abi\");\n"
                                     "extern \"C\" int kevo_forward(const kevo_tensor*, int, kevo_tensor*, int, cudaStream_t) { return 0; }\n",
                                     options(cache.path()));
    EXPECT_TRUE(r.ok) << r.log;
}

TEST(Compile, MissingEntryPointFailsAtCompileTimeWithTheContract) {
    TempDir cache("kevo-test-cache");
    CompileResult r = compile_kernel("#include <kernelevo/abi.h>\n__global__ void k(float* p) { p[0] = 1; }\n"
                                     "extern \"C\" int kevo_forward_v2(const kevo_tensor*, int, kevo_tensor*, int, cudaStream_t) { return 0; }\n",
                                     options(cache.path()));
    EXPECT_FALSE(r.ok);
    EXPECT_NE(r.log.find("kevo_forward"), std::string::npos) << r.log;
    EXPECT_NE(r.log.find("note: a candidate must define extern \"C\" int kevo_forward("), std::string::npos) << r.log;
}

TEST(Compile, TorchHeaderInACandidateGetsAHint) {
    TempDir cache("kevo-test-cache");
    CompileResult r = compile_kernel("#include <torch/torch.h>\n#include <kernelevo/abi.h>\n"
                                     "extern \"C\" int kevo_forward(const kevo_tensor*, int, kevo_tensor*, int, cudaStream_t) { return 0; }\n",
                                     options(cache.path()));
    EXPECT_FALSE(r.ok);
    EXPECT_NE(r.log.find("torch/torch.h"), std::string::npos) << r.log;
    EXPECT_NE(r.log.find("note: candidates include no LibTorch header"), std::string::npos) << r.log;
}

TEST(Compile, TrimKeepsFirstErrorsAndCapsSize) {
    std::string log;
    for (int i = 0; i < 1000; ++i) log += "kernel.cu(" + std::to_string(i) + "): error: something is wrong here\n";
    std::string t = trim_compiler_log(log, 2000);
    EXPECT_LE(t.size(), 2200u);
    EXPECT_EQ(t.find("kernel.cu(0): error"), 0u);
    EXPECT_NE(t.find("omitted"), std::string::npos);
}

// The result of a real compile survives its wire form (compile worker -> search) field for field;
// the local paths stay out.
TEST(Compile, ResultTravelsFieldForFieldWithoutItsLocalPaths) {
    TempDir cache("kevo-test-cache");
    CompileResult a = compile_kernel(fixture("good.cu"), options(cache.path()));
    ASSERT_TRUE(a.ok) << a.log;
    ASSERT_FALSE(a.kernels.empty());
    a.limit_hit = true;  // every field set to something other than its default
    a.cached = true;
    a.backend = "triton";
    a.generated_source = "// generated";
    a.backend_info = nlohmann::json{{"triton_version", "3.6.0"}};
    const nlohmann::json j = compile_result_to_json(a);
    EXPECT_FALSE(j.contains("library"));
    EXPECT_FALSE(j.contains("library_sha256"));
    CompileResult b = compile_result_from_json(nlohmann::json::parse(j.dump()));
#define KEVO_X(f) EXPECT_EQ(b.f, a.f) << #f;
    KEVO_COMPILE_RESULT_WIRE_FIELDS(KEVO_X)
#undef KEVO_X
    ASSERT_EQ(b.kernels.size(), a.kernels.size());
    EXPECT_EQ(b.kernels[0].to_json(), a.kernels[0].to_json());
    EXPECT_TRUE(b.library.empty());
    // An old worker's reply, without the newer fields, leaves them at their defaults.
    CompileResult c = compile_result_from_json(nlohmann::json{{"ok", true}, {"log", ""}});
    EXPECT_TRUE(c.ok);
    EXPECT_EQ(c.backend, "cuda");
    EXPECT_TRUE(c.kernels.empty());
}
