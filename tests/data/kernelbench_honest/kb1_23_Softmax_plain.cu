// A plain honest kernel for KernelBench L1-23 (softmax over the last dimension): one block per
// row, three passes (max, sum of exponentials, write). (benchmarks/studies/kb_concurrent.sh; not tuned.)
#include <kernelevo/abi.h>
#include <math.h>

template <bool kMax>
__device__ float block_reduce(float v, float* shared) {
    for (int o = 16; o > 0; o >>= 1) {
        float w = __shfl_xor_sync(0xffffffffu, v, o);
        v = kMax ? fmaxf(v, w) : v + w;
    }
    if ((threadIdx.x & 31) == 0) shared[threadIdx.x >> 5] = v;
    __syncthreads();
    if (threadIdx.x < 32) {
        v = threadIdx.x < (blockDim.x >> 5) ? shared[threadIdx.x] : (kMax ? -INFINITY : 0.f);
        for (int o = 16; o > 0; o >>= 1) {
            float w = __shfl_xor_sync(0xffffffffu, v, o);
            v = kMax ? fmaxf(v, w) : v + w;
        }
        if (threadIdx.x == 0) shared[32] = v;
    }
    __syncthreads();
    float r = shared[32];
    __syncthreads();
    return r;
}

__global__ void softmax_rows(const float* __restrict__ x, float* __restrict__ y, long long cols) {
    __shared__ float shared[33];
    const float* row = x + (long long)blockIdx.x * cols;
    float* out = y + (long long)blockIdx.x * cols;
    float m = -INFINITY;
    for (long long i = threadIdx.x; i < cols; i += blockDim.x) m = fmaxf(m, row[i]);
    m = block_reduce<true>(m, shared);
    float sum = 0.f;
    for (long long i = threadIdx.x; i < cols; i += blockDim.x) sum += expf(row[i] - m);
    sum = block_reduce<false>(sum, shared);
    const float inv = 1.f / sum;
    for (long long i = threadIdx.x; i < cols; i += blockDim.x) out[i] = expf(row[i] - m) * inv;
}

extern "C" int kevo_forward(const kevo_tensor* in, int n_in, kevo_tensor* out, int n_out, cudaStream_t s) {
    if (n_in != 1 || n_out != 1 || in[0].ndim < 1) return 1;
    const long long cols = in[0].sizes[in[0].ndim - 1], rows = kevo_numel(&in[0]) / cols;
    softmax_rows<<<(unsigned)rows, 1024, 0, s>>>((const float*)in[0].data, (float*)out[0].data, cols);
    return cudaGetLastError() == cudaSuccess ? 0 : 2;
}
