// The one input filler on the device: bit for bit what the host fill gives (refcheck's inputs), for
// every init kind and every dtype, through the kernel by the names the validator's judge launches it
// (validate/runner/device_ops.cuh) and through kernelevo-profile itself (--dump-inputs). Skips
// without a CUDA device (benchmarks/studies/gpu_suite.sh runs it on a GPU host).
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "device/fill.cuh"
#include "device/fill.h"
#include "python_fill.h"
#include "validate/runner/device_ops.cuh"

namespace {

bool have_gpu() {
    int n = 0;
    return cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
}

const int kKinds[] = {KEVO_INIT_RANDN, KEVO_INIT_RAND, KEVO_INIT_RANDINT, KEVO_INIT_ONES, KEVO_INIT_ZEROS,
                      KEVO_INIT_FULL, KEVO_INIT_ARANGE};

// Parameters that suit the dtype: integers get small integer ranges, bool 0 or 1.
void params(int kind, int dtype, double* a, double* b) {
    const bool integral = !kevo_dtype_is_floating(dtype);
    *a = kind == KEVO_INIT_RANDN ? 0.25 : (dtype == KEVO_BOOL ? 0 : -3);
    *b = kind == KEVO_INIT_RANDN ? 1.5 : (dtype == KEVO_BOOL ? 2 : 100);
    if (dtype == KEVO_UINT8) *a = 0;
    if (kind == KEVO_INIT_FULL) *a = integral ? 7 : 0.3;
}

size_t first_difference(const std::vector<char>& x, const std::vector<char>& y) {
    size_t i = 0;
    while (i < x.size() && x[i] == y[i]) ++i;
    return i;
}

// Every kind and every dtype, >= 1M elements, two launch shapes (the judge's: SMs x 16 blocks;
// kernelevo-profile's: 256 blocks), against fill_host.
TEST(DeviceFill, EveryKindAndDtypeIsTheHostFillBitForBit) {
    if (!have_gpu()) GTEST_SKIP() << "no CUDA device";
    int sms = 0;
    ASSERT_EQ(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0), cudaSuccess);
    const int64_t n = (int64_t{1} << 20) + 37;
    void* dev = nullptr;
    ASSERT_EQ(cudaMalloc(&dev, n * 8), cudaSuccess);
    int compared = 0;
    for (int dtype = 0; dtype < KEVO_DTYPE_COUNT; ++dtype)
        for (int kind : kKinds) {
            double a, b;
            params(kind, dtype, &a, &b);
            const size_t bytes = static_cast<size_t>(n) * kevo_dtype_size(dtype);
            const uint64_t seed = kevo_runner::tensor_seed(0x5eed + dtype, static_cast<uint64_t>(kind));
            std::vector<char> host(bytes), got(bytes);
            kevo_device::fill_host(host.data(), dtype, n, kind, a, b, seed);
            for (int grid : {sms * 16, 256}) {
                ASSERT_EQ(cudaMemset(dev, 0xA5, bytes), cudaSuccess);
                kevo_runner::fill_kernel<<<grid, 256>>>(dev, dtype, n, kind, a, b, seed);
                ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
                ASSERT_EQ(cudaMemcpy(got.data(), dev, bytes, cudaMemcpyDeviceToHost), cudaSuccess);
                const size_t d = first_difference(host, got);
                EXPECT_EQ(d, bytes) << kevo_dtype_name(dtype) << " " << kevo_init_kind_name(kind) << " (grid " << grid
                                    << "): first differing element " << d / kevo_dtype_size(dtype);
                ++compared;
            }
        }
    cudaFree(dev);
    std::printf("compared %d fills of %lld elements with the host fill\n", compared, static_cast<long long>(n));
}

// Wide parameters and seeds: randn's tails, a large randint range, seeds near 2^64.
TEST(DeviceFill, Float64DrawsAreTheHostsForManySeeds) {
    if (!have_gpu()) GTEST_SKIP() << "no CUDA device";
    const int64_t n = int64_t{1} << 22;
    double* dev = nullptr;
    ASSERT_EQ(cudaMalloc(&dev, n * 8), cudaSuccess);
    for (uint64_t seed : {uint64_t{0}, uint64_t{1}, uint64_t{42}, ~uint64_t{0}, uint64_t{0x8000000000000001ull}})
        for (int kind : {KEVO_INIT_RANDN, KEVO_INIT_RAND, KEVO_INIT_RANDINT}) {
            std::vector<double> host(n), got(n);
            kevo_device::fill_host(host.data(), KEVO_FLOAT64, n, kind, -1e6, 3e9, seed);
            kevo_runner::fill_kernel<<<1024, 256>>>(dev, KEVO_FLOAT64, n, kind, -1e6, 3e9, seed);
            ASSERT_EQ(cudaMemcpy(got.data(), dev, n * 8, cudaMemcpyDeviceToHost), cudaSuccess);
            EXPECT_EQ(0, std::memcmp(host.data(), got.data(), n * 8)) << "seed " << seed << " kind " << kind;
        }
    cudaFree(dev);
}

// kernelevo-profile draws input k with tensor_seed(seed, k): the host fill's bits, so the profiler
// profiles a candidate on the inputs a validation with that seed checked.
TEST(DeviceFill, TheProfileProgramDrawsTheValidatorsInputs) {
    if (!have_gpu()) GTEST_SKIP() << "no CUDA device";
    struct In { int dtype, kind; double a, b; };
    const In ins[] = {{KEVO_FLOAT32, KEVO_INIT_RANDN, 0, 1}, {KEVO_FLOAT16, KEVO_INIT_RAND, -1, 1},
                      {KEVO_BFLOAT16, KEVO_INIT_RANDN, 1, 2},  {KEVO_INT64, KEVO_INIT_RANDINT, 0, 1000},
                      {KEVO_INT32, KEVO_INIT_RANDINT, -7, 7},  {KEVO_BOOL, KEVO_INIT_RANDINT, 0, 2},
                      {KEVO_FLOAT64, KEVO_INIT_ARANGE, 0, 0},  {KEVO_UINT8, KEVO_INIT_FULL, 9, 0}};
    const int64_t n = (int64_t{1} << 20) + 1;
    const uint64_t seed = 123456789;
    const std::string dir = ::testing::TempDir() + "kevo_profile_dump";
    std::string cmd = std::string(KEVO_PROFILE_EXE) + " --dump-inputs " + dir + " --seed " + std::to_string(seed);
    for (const In& in : ins) {
        char spec[128];
        std::snprintf(spec, sizeof spec, " --in %d:%lld:%d:%.17g:%.17g", in.dtype, static_cast<long long>(n), in.kind, in.a, in.b);
        cmd += spec;
    }
    cmd += " --out 0:1 2>" + dir + ".err";
    ASSERT_EQ(std::system(("mkdir -p " + dir).c_str()), 0);
    const int rc = std::system(cmd.c_str());
    std::ifstream err(dir + ".err");
    const std::string err_text((std::istreambuf_iterator<char>(err)), std::istreambuf_iterator<char>());
    ASSERT_EQ(rc, 0) << cmd << "\n" << err_text;
    EXPECT_EQ(err_text, "") << "kernelevo-profile said something while filling";
    for (size_t k = 0; k < std::size(ins); ++k) {
        std::ifstream f(dir + "/in" + std::to_string(k) + ".bin", std::ios::binary);
        std::vector<char> got((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
        std::vector<char> want(static_cast<size_t>(n) * kevo_dtype_size(ins[k].dtype));
        kevo_device::fill_host(want.data(), ins[k].dtype, n, ins[k].kind, ins[k].a, ins[k].b, kevo_device::tensor_seed(seed, k));
        ASSERT_EQ(got.size(), want.size()) << "input " << k;
        EXPECT_EQ(first_difference(want, got), want.size()) << "input " << k << " (" << kevo_dtype_name(ins[k].dtype) << ")";
    }
    std::system(("rm -rf " + dir).c_str());
}

// On the GPU host the importer runs refcheck_values on CUDA: torch's CUDA kernels give the bits too.
TEST(DeviceFill, PythonsRefcheckValuesOnCudaAreTheHostFill) {
    if (!have_gpu()) GTEST_SKIP() << "no CUDA device";
    const char* py = std::getenv("KEVO_PYTHON");
    kevo_device_test::expect_python_draws_the_host_fill(py && *py ? py : "python3", "cuda");
}

}  // namespace
