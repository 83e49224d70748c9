// ptxas resource figures: parsing recorded -Xptxas -v output (CUDA 12 and 13 spellings), keeping
// them out of the compile log, and a real nvcc compile (and cache hit) that reports them.
#include <gtest/gtest.h>

#include "common/fs.h"
#include "compile/compile.h"

using namespace kevo;

namespace {
// nvcc 13.0 (recorded here), with a non-entry helper's properties in between.
const char* kLog13 =
    "ptxas info    : 0 bytes gmem\n"
    "ptxas info    : Compiling entry function '_Z1bILi4EEvPd' for 'sm_90'\n"
    "ptxas info    : Function properties for _Z1bILi4EEvPd\n"
    "    512 bytes stack frame, 24 bytes spill stores, 16 bytes spill loads\n"
    "ptxas info    : Used 255 registers, used 0 barriers, 512 bytes cumulative stack size\n"
    "ptxas info    : Compile time = 257.296 ms\n"
    "ptxas info    : Compiling entry function '_Z1aPfi' for 'sm_90'\n"
    "ptxas info    : Function properties for _Z1aPfi\n"
    "    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n"
    "ptxas info    : Used 10 registers, used 1 barriers, 4096 bytes smem\n"
    "ptxas info    : Compile time = 1.932 ms\n"
    "ptxas info    : Function properties for _Z6helperf\n"
    "    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n";
// nvcc 12.x: constant memory on the "Used" line, properties before "Used".
const char* kLog12 =
    "ptxas info    : 0 bytes gmem\n"
    "ptxas info    : Compiling entry function 'softmax_kernel' for 'sm_80'\n"
    "ptxas info    : Function properties for softmax_kernel\n"
    "    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n"
    "ptxas info    : Used 40 registers, 49152 bytes smem, 372 bytes cmem[0]\n"
    "kernel.cu(12): warning #177-D: variable \"unused\" was declared but never referenced\n";

CompileOptions options(const fs::path& cache) {
    CompileOptions o;
    o.arch = "sm_90";
    o.cache_dir = cache;
    return o;
}
}  // namespace

TEST(Ptxas, ParsesEachEntryFunction) {
    auto k = parse_ptxas_info(kLog13);
    ASSERT_EQ(k.size(), 2u);  // the helper is not an entry function
    EXPECT_EQ(k[0].name, "void b<4>(double*)");
    EXPECT_EQ(k[0].mangled, "_Z1bILi4EEvPd");
    EXPECT_EQ(k[0].arch, "sm_90");
    EXPECT_EQ(k[0].registers, 255);
    EXPECT_EQ(k[0].stack_bytes, 512);
    EXPECT_EQ(k[0].spill_stores, 24);
    EXPECT_EQ(k[0].spill_loads, 16);
    EXPECT_EQ(k[1].name, "a(float*, int)");
    EXPECT_EQ(k[1].registers, 10);
    EXPECT_EQ(k[1].barriers, 1);
    EXPECT_EQ(k[1].smem_bytes, 4096);
    EXPECT_EQ(k[1].spill_stores, 0);

    auto k12 = parse_ptxas_info(kLog12);
    ASSERT_EQ(k12.size(), 1u);
    EXPECT_EQ(k12[0].name, "softmax_kernel");  // extern "C": nothing to demangle
    EXPECT_EQ(k12[0].registers, 40);
    EXPECT_EQ(k12[0].smem_bytes, 49152);
    EXPECT_TRUE(parse_ptxas_info("kernel.cu(3): error: expected a \";\"\n").empty());
}

TEST(Ptxas, SummaryAndStrippedLog) {
    EXPECT_EQ(resources_summary(parse_ptxas_info(kLog13)),
              "void b<4>(double*): 255 registers, SPILLS 24 B stored / 16 B loaded, 512 B stack\n"
              "a(float*, int): 10 registers, 4096 B static shared memory, no spills");
    EXPECT_EQ(strip_ptxas_info(kLog12), "kernel.cu(12): warning #177-D: variable \"unused\" was declared but never referenced\n");
    EXPECT_EQ(strip_ptxas_info(kLog13), "");
    auto back = KernelResources::from_json(parse_ptxas_info(kLog13)[0].to_json());
    EXPECT_EQ(back.to_json(), parse_ptxas_info(kLog13)[0].to_json());
}

TEST(Ptxas, RealCompileReportsResourcesAlsoOnACacheHit) {
    TempDir cache("kevo-ptxas-test");
    const std::string src =
        "#include <kernelevo/abi.h>\n"
        "__global__ void stage(const float* x, float* y, int n) {\n"
        "  __shared__ float tile[256];\n"
        "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
        "  tile[threadIdx.x] = i < n ? x[i] : 0.f;\n"
        "  __syncthreads();\n"
        "  if (i < n) y[i] = tile[255 - threadIdx.x] * 2.f;\n"
        "}\n"
        "extern \"C\" int kevo_forward(const kevo_tensor* in, int, kevo_tensor* out, int, cudaStream_t s) {\n"
        "  int n = (int)in[0].sizes[0];\n"
        "  stage<<<(n + 255) / 256, 256, 0, s>>>((const float*)in[0].data, (float*)out[0].data, n);\n"
        "  return 0;\n"
        "}\n";
    CompileResult r = compile_kernel(src, options(cache.path()));
    ASSERT_TRUE(r.ok) << r.log;
    ASSERT_EQ(r.kernels.size(), 1u);
    EXPECT_EQ(r.kernels[0].name, "stage(float const*, float*, int)");
    EXPECT_GT(r.kernels[0].registers, 0);
    EXPECT_EQ(r.kernels[0].smem_bytes, 1024);
    EXPECT_EQ(r.kernels[0].barriers, 1);
    EXPECT_EQ(r.log.find("ptxas info"), std::string::npos) << r.log;  // the log stays for humans
    CompileResult again = compile_kernel(src, options(cache.path()));
    ASSERT_TRUE(again.cached);
    ASSERT_EQ(again.kernels.size(), 1u);
    EXPECT_EQ(again.kernels[0].to_json(), r.kernels[0].to_json());
}
