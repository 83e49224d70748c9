// One block per row; mean and variance in fp32 (two passes over the row), output rounded to bf16.
#include <kernelevo/abi.h>
#include <cuda_bf16.h>

__device__ float block_sum(float v, float* sh) {
    for (int o = 16; o > 0; o /= 2) v += __shfl_xor_sync(0xffffffffu, v, o);
    int w = threadIdx.x / 32, l = threadIdx.x % 32;
    __syncthreads();
    if (l == 0) sh[w] = v;
    __syncthreads();
    float t = 0.f;
    for (int i = 0; i < (int)blockDim.x / 32; ++i) t += sh[i];
    return t;
}

__global__ void ln(const __nv_bfloat16* x, const __nv_bfloat16* w, const __nv_bfloat16* b, __nv_bfloat16* y, int N) {
    __shared__ float sh[32];
    const __nv_bfloat16* xr = x + (long long)blockIdx.x * N;
    __nv_bfloat16* yr = y + (long long)blockIdx.x * N;
    float s = 0.f;
    for (int j = threadIdx.x; j < N; j += blockDim.x) s += __bfloat162float(xr[j]);
    float mean = block_sum(s, sh) / N;
    float q = 0.f;
    for (int j = threadIdx.x; j < N; j += blockDim.x) {
        float d = __bfloat162float(xr[j]) - mean;
        q += d * d;
    }
    float rstd = rsqrtf(block_sum(q, sh) / N + 1e-5f);
    for (int j = threadIdx.x; j < N; j += blockDim.x)
        yr[j] = __float2bfloat16((__bfloat162float(xr[j]) - mean) * rstd * __bfloat162float(w[j]) + __bfloat162float(b[j]));
}

extern "C" int kevo_forward(const kevo_tensor* in, int n_in, kevo_tensor* out, int n_out, cudaStream_t st) {
    if (n_in != 3 || n_out != 1 || in[0].dtype != KEVO_BFLOAT16) return 1;
    int M = (int)in[0].sizes[0], N = (int)in[0].sizes[1];
    ln<<<M, 256, 0, st>>>((const __nv_bfloat16*)in[0].data, (const __nv_bfloat16*)in[1].data, (const __nv_bfloat16*)in[2].data,
                          (__nv_bfloat16*)out[0].data, N);
    return cudaGetLastError() == cudaSuccess ? 0 : 2;
}
