// gelu_bias with two tunables: threads per block and elements per thread (float4 loads).
#include <kernelevo/abi.h>

KEVO_TUNABLE(BLOCK, 256, 64 128 256 512)
KEVO_TUNABLE(ITEMS, 1, 1 2 4 8)

__device__ __forceinline__ float gelu(float v) { return 0.5f * v * (1.0f + erff(v * 0.70710678118654752f)); }

__global__ void gelu_bias_vec4(const float4* __restrict__ x, const float4* __restrict__ b, float4* __restrict__ y, long long n4,
                               long long n4_row) {
    long long base = (blockIdx.x * (long long)BLOCK) * ITEMS + threadIdx.x;
#pragma unroll
    for (int k = 0; k < ITEMS; ++k) {
        long long i = base + (long long)k * BLOCK;
        if (i < n4) {
            float4 v = x[i], c = b[i % n4_row];
            y[i] = make_float4(gelu(v.x + c.x), gelu(v.y + c.y), gelu(v.z + c.z), gelu(v.w + c.w));
        }
    }
}

__global__ void gelu_bias_scalar(const float* __restrict__ x, const float* __restrict__ b, float* __restrict__ y, long long n, long long row) {
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x)
        y[i] = gelu(x[i] + b[i % row]);
}

extern "C" int kevo_forward(const kevo_tensor* in, int n_in, kevo_tensor* out, int n_out, cudaStream_t stream) {
    if (n_in != 2 || n_out != 1) return 1;
    const long long n = kevo_numel(&in[0]), row = in[1].sizes[0];
    if (row % 4 == 0) {
        long long n4 = n / 4, per_block = (long long)BLOCK * ITEMS;
        gelu_bias_vec4<<<(unsigned)((n4 + per_block - 1) / per_block), BLOCK, 0, stream>>>(
            (const float4*)in[0].data, (const float4*)in[1].data, (float4*)out[0].data, n4, row / 4);
    } else {
        gelu_bias_scalar<<<(unsigned)((n + BLOCK - 1) / BLOCK), BLOCK, 0, stream>>>((const float*)in[0].data, (const float*)in[1].data,
                                                                                    (float*)out[0].data, n, row);
    }
    return cudaGetLastError() == cudaSuccess ? 0 : 2;
}
