// A plain honest kernel for KernelBench L1-22 Tanh.
// Elementwise over any contiguous float32 shape: a grid-stride loop with 64-bit indices.
// Strict fp32 (no fast-math intrinsics). Simple and clearly correct, not tuned.
#include <kernelevo/abi.h>
#include <math.h>

__device__ __forceinline__ float op(float x) {
    return tanhf(x);
}

__global__ void elementwise(const float* __restrict__ x, float* __restrict__ y, long long n) {
    const long long stride = (long long)gridDim.x * blockDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) y[i] = op(x[i]);
}

extern "C" int kevo_forward(const kevo_tensor* in, int n_in, kevo_tensor* out, int n_out, cudaStream_t s) {
    if (n_in != 1 || n_out != 1 || in[0].dtype != KEVO_FLOAT32) return 1;
    const long long n = kevo_numel(&in[0]);
    if (n == 0) return 0;
    const int threads = 256;
    long long blocks = (n + threads - 1) / threads;
    if (blocks > 132LL * 64) blocks = 132LL * 64;  // enough to fill the GPU; the loop covers the rest
    elementwise<<<(unsigned)blocks, threads, 0, s>>>((const float*)in[0].data, (float*)out[0].data, n);
    return cudaGetLastError() == cudaSuccess ? 0 : 2;
}
