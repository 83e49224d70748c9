// Candidates that call cuBLAS and cuBLASLt through the caller's handles (kernel ABI version 2,
// kernelevo/abi.h), compiled and linked by a real nvcc; the source rules that refuse a candidate's
// own handle or stream; version-1 kernels compiling and linking as before, without cuBLAS.
#include <gtest/gtest.h>

#include "common/fs.h"
#include "compile/compile.h"
#include "compile/source_rules.h"

using namespace kevo;

namespace {
std::string kernel(const std::string& name) { return read_file(fs::path(KEVO_TEST_DATA_DIR) / "matmul" / "kernels" / name); }

CompileOptions options(const fs::path& cache) {
    CompileOptions o;
    o.arch = "sm_90";
    o.cache_dir = cache;
    return o;
}

// The shared libraries a compiled kernel depends on and the symbols it leaves to its caller are
// named in its dynamic string table: enough to tell whether a name occurs there.
bool library_mentions(const fs::path& so, const std::string& name) { return read_file(so).find(name) != std::string::npos; }

const char* const kVersionOne =
    "#include <kernelevo/abi.h>\n"
    "__global__ void copy(const float* x, float* y, long long n) {\n"
    "    long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;\n"
    "    if (i < n) y[i] = x[i];\n"
    "}\n"
    "extern \"C\" int kevo_forward(const kevo_tensor* in, int n_in, kevo_tensor* out, int n_out, cudaStream_t stream) {\n"
    "    long long n = kevo_numel(&in[0]);\n"
    "    copy<<<(unsigned)((n + 255) / 256), 256, 0, stream>>>((const float*)in[0].data, (float*)out[0].data, n);\n"
    "    return cudaGetLastError() == cudaSuccess ? 0 : 1;\n"
    "}\n";
}  // namespace

TEST(CompileCublas, SgemmWithTheCallersHandleCompilesAndLinksCublas) {
    TempDir cache("kevo-test-cache");
    CompileResult r = compile_kernel(kernel("cublas_sgemm.cu"), options(cache.path()));
    ASSERT_TRUE(r.ok) << r.log;
    // Linked against the toolkit's cuBLAS (not left for the loader to fail on), the handle left to
    // the caller (an undefined symbol the runner, the runtime or load_op's glue defines).
    EXPECT_TRUE(library_mentions(r.library, "libcublas.so")) << r.library;
    EXPECT_TRUE(library_mentions(r.library, "cublasSgemm_v2"));
    EXPECT_TRUE(library_mentions(r.library, "kevo_cublas_handle"));
}

TEST(CompileCublas, LtMatmulWithTheCallersWorkspaceCompilesAndLinksCublasLt) {
    TempDir cache("kevo-test-cache");
    CompileResult r = compile_kernel(kernel("cublaslt_matmul.cu"), options(cache.path()));
    ASSERT_TRUE(r.ok) << r.log;
    EXPECT_TRUE(library_mentions(r.library, "libcublasLt.so"));
    EXPECT_TRUE(library_mentions(r.library, "kevo_cublaslt_handle"));
    EXPECT_TRUE(library_mentions(r.library, "kevo_cublas_workspace"));
}

// nvcc on PATH may be a wrapper script outside the toolkit (a /usr/local/bin/nvcc that execs the
// toolkit's): the toolkit's libraries are still found (as nvcc itself reports them) and linked.
// CI ran into this: its PATH had only the wrapper, and cuBLAS kernels linked nothing.
TEST(CompileCublas, AnNvccWrapperScriptElsewhereStillLinksTheToolkitsCublas) {
    TempDir cache("kevo-test-cache");
    TempDir bin("kevo-test-nvcc-wrapper");
    CompileOptions o = options(cache.path());
    const std::string real = fs::weakly_canonical(nvcc_path(o)).string();
    write_file_atomic(bin.path() / "nvcc", "#!/bin/sh\nexec '" + real + "' \"$@\"\n");
    fs::permissions(bin.path() / "nvcc", fs::perms::owner_all);
    o.nvcc = (bin.path() / "nvcc").string();
    CompileResult r = compile_kernel(kernel("cublas_sgemm.cu"), o);
    ASSERT_TRUE(r.ok) << r.log;
    EXPECT_TRUE(library_mentions(r.library, "libcublas.so")) << r.library;
}

TEST(CompileCublas, VersionOneKernelCompilesAndDependsOnNoCublas) {
    TempDir cache("kevo-test-cache");
    CompileResult r = compile_kernel(kVersionOne, options(cache.path()));
    ASSERT_TRUE(r.ok) << r.log;
    // Linked only as needed: a kernel that calls no cuBLAS loads without it, under any caller.
    EXPECT_FALSE(library_mentions(r.library, "libcublas"));
    EXPECT_FALSE(library_mentions(r.library, KEVO_CUBLAS_SYMBOL_PREFIX));
}

TEST(CompileCublas, OwnHandleIsRefusedBeforeNvccWithThePointerToTheProvidedOne) {
    TempDir cache("kevo-test-cache");
    CompileResult r = compile_kernel(kernel("cublas_own_handle.cu"), options(cache.path()));
    EXPECT_FALSE(r.ok);
    EXPECT_TRUE(r.library.empty());
    EXPECT_NE(r.log.find("kernel.cu(10): error: a candidate may not call cublasCreate"), std::string::npos) << r.log;
    EXPECT_NE(r.log.find("kevo_cublas_handle(stream)"), std::string::npos) << r.log;
}

TEST(CompileCublas, SourceRulesNameEachForbiddenCallAndIgnoreCommentsAndStrings) {
    EXPECT_EQ(forbidden_call_in_source(kVersionOne), "");
    EXPECT_EQ(forbidden_call_in_source("// never cublasCreate(&h) here\n/* nor cudaStreamCreate */\n"
                                       "const char* s = \"cublasLtCreate\"; char c = 'x';\nint kevo_cublas_handle_user;\n"),
              "");
    const std::string lt = forbidden_call_in_source("int a;\n\nauto r = cublasLtCreate(&lt);\n");
    EXPECT_NE(lt.find("kernel.cu(3): error: a candidate may not call cublasLtCreate"), std::string::npos) << lt;
    EXPECT_NE(lt.find("kevo_cublaslt_handle(stream)"), std::string::npos) << lt;
    const std::string stream = forbidden_call_in_source("cudaStream_t s; cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);");
    EXPECT_NE(stream.find("may not call cudaStreamCreateWithFlags"), std::string::npos) << stream;
    EXPECT_NE(stream.find("no other streams"), std::string::npos) << stream;
    EXPECT_NE(forbidden_call_in_source("cublasSetStream_v2(h, other);").find("cublasSetStream_v2"), std::string::npos);
    EXPECT_NE(forbidden_call_in_source("CUstream s; cuStreamCreate(&s, 0);").find("cuStreamCreate"), std::string::npos);
    // A name that merely contains a forbidden one is not a call of it.
    EXPECT_EQ(forbidden_call_in_source("int my_cublasCreate_count = 0; int xcudaStreamCreate;"), "");
}
