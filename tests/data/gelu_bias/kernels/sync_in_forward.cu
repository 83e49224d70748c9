// Correct, but kevo_forward waits for its own stream before returning (an honest, slow habit):
// the correctness gate cannot hold such a call back, so its watchdog releases it; the result is ok
// with a warning, and the stream check of those trials is recorded as not made.
#include <kernelevo/abi.h>

__device__ __forceinline__ float gelu(float v) { return 0.5f * v * (1.0f + erff(v * 0.70710678118654752f)); }

__global__ void gelu_bias_vec4(const float4* __restrict__ x, const float4* __restrict__ b, float4* __restrict__ y, long long n4, long long n4_row) {
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n4; i += (long long)gridDim.x * blockDim.x) {
        float4 v = x[i], c = b[i % n4_row];
        y[i] = make_float4(gelu(v.x + c.x), gelu(v.y + c.y), gelu(v.z + c.z), gelu(v.w + c.w));
    }
}

__global__ void gelu_bias_scalar(const float* __restrict__ x, const float* __restrict__ b, float* __restrict__ y, long long n, long long row) {
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x)
        y[i] = gelu(x[i] + b[i % row]);
}

extern "C" int kevo_forward(const kevo_tensor* in, int n_in, kevo_tensor* out, int n_out, cudaStream_t stream) {
    if (n_in != 2 || n_out != 1) return 1;
    const long long n = kevo_numel(&in[0]), row = in[1].sizes[0];
    const int threads = 256;
    if (row % 4 == 0) {
        long long n4 = n / 4;
        int blocks = (int)((n4 + threads - 1) / threads);
        if (blocks > 132 * 32) blocks = 132 * 32;
        gelu_bias_vec4<<<blocks, threads, 0, stream>>>((const float4*)in[0].data, (const float4*)in[1].data, (float4*)out[0].data, n4, row / 4);
    } else {
        int blocks = (int)((n + threads - 1) / threads);
        if (blocks > 132 * 32) blocks = 132 * 32;
        gelu_bias_scalar<<<blocks, threads, 0, stream>>>((const float*)in[0].data, (const float*)in[1].data, (float*)out[0].data, n, row);
    }
    if (cudaGetLastError() != cudaSuccess) return 2;
    return cudaStreamSynchronize(stream) == cudaSuccess ? 0 : 2;
}
