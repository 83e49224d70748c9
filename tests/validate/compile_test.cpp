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
    CompileResult r = compile_kernel("#include <kernelevo/abi.h>\nstatic_assert(KEVO_ABI_VERSION == 1, \"abi\");\n"
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
