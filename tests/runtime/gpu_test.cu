// The dispatch on a real GPU: a tiny kernel registered for the local device's architecture runs
// through kevo_select() on device memory. Skipped without a CUDA device (run it on the H200).
#include <gtest/gtest.h>

#include <cuda_runtime.h>

#include <vector>

#include "kernelevo/runtime.h"

namespace {

__global__ void add_one(const float* x, float* y, long long n) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = x[i] + 1.f;
}

extern "C" int add_one_forward(const kevo_tensor* in, int, kevo_tensor* out, int, cudaStream_t stream) {
    long long n = kevo_numel(&in[0]);
    add_one<<<(unsigned)((n + 255) / 256), 256, 0, stream>>>((const float*)in[0].data, (float*)out[0].data, n);
    return cudaGetLastError() == cudaSuccess ? 0 : 1;
}

bool have_gpu() {
    int n = 0;
    return cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
}

TEST(RuntimeGpu, DetectsTheDeviceAndRunsItsKernel) {
    if (!have_gpu()) GTEST_SKIP() << "no CUDA device";
    kevo_set_device_cc(-1);
    kevo_set_disabled(0);
    cudaDeviceProp p{};
    ASSERT_EQ(cudaGetDeviceProperties(&p, 0), cudaSuccess);
    const int cc = kevo_device_cc(0);
    ASSERT_EQ(cc, 10 * p.major + p.minor);

    static const kevo_tensor_spec in_spec[] = {{"x", KEVO_FLOAT32, 1, {-1}}};
    static const kevo_tensor_spec out_spec[] = {{"y", KEVO_FLOAT32, 1, {-1}}};
    static const char* const sym[] = {"N"};
    static kevo_kernel_entry kernels[] = {{"sm_local", cc, &add_one_forward}};
    static kevo_function fn = {"gpu_add_one", 1, 1, 1, 1, in_spec, out_spec, sym, kernels, "sm_local", 0, 0, 0};
    kevo_register_function(&fn);

    const long long n = 1000;
    float *dx = nullptr, *dy = nullptr;
    ASSERT_EQ(cudaMalloc(&dx, n * sizeof(float)), cudaSuccess);
    ASSERT_EQ(cudaMalloc(&dy, n * sizeof(float)), cudaSuccess);
    std::vector<float> hx(n);
    for (long long i = 0; i < n; ++i) hx[i] = float(i);
    cudaMemcpy(dx, hx.data(), n * sizeof(float), cudaMemcpyHostToDevice);

    kevo_tensor in{}, out{};
    in.data = dx, in.ndim = 1, in.dtype = KEVO_FLOAT32, in.sizes[0] = n, in.strides[0] = 1;
    kevo_forward_fn f = kevo_select(&fn, 0, &in, 1, &out, 1);
    ASSERT_NE(f, nullptr) << kevo_last_reason("gpu_add_one");
    EXPECT_EQ(out.sizes[0], n);
    out.data = dy;
    ASSERT_EQ(f(&in, 1, &out, 1, nullptr), 0);
    std::vector<float> hy(n);
    cudaMemcpy(hy.data(), dy, n * sizeof(float), cudaMemcpyDeviceToHost);
    for (long long i = 0; i < n; ++i) ASSERT_EQ(hy[i], float(i) + 1.f);
    EXPECT_STREQ(kevo_last_impl("gpu_add_one"), "sm_local");

    // A kernel table without this device's arch falls back.
    kernels[0].cc = cc + 1;
    EXPECT_EQ(kevo_select(&fn, 0, &in, 1, &out, 1), nullptr);
    EXPECT_STREQ(kevo_last_impl("gpu_add_one"), "reference");
    cudaFree(dx);
    cudaFree(dy);
}

}  // namespace
