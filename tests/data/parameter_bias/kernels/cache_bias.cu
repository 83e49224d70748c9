// Wrong for a model: copies the bias it is given on its first call and reads that copy ever after
// (a "pre-packed weight"). With fixed weight values on every trial it would pass; the judge varies
// a parameter's values after each set's first trial, so it must fail there.
#include <kernelevo/abi.h>

__device__ float kept_bias[1024];
static bool kept = false;

__global__ void gelu_bias_kept(const float* __restrict__ x, float* __restrict__ y, long long n, long long row) {
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {
        float v = x[i] + kept_bias[i % row];
        y[i] = 0.5f * v * (1.0f + erff(v * 0.70710678118654752f));
    }
}

extern "C" int kevo_forward(const kevo_tensor* in, int n_in, kevo_tensor* out, int n_out, cudaStream_t stream) {
    if (n_in != 2 || n_out != 1 || in[1].sizes[0] > 1024) return 1;
    const long long n = kevo_numel(&in[0]), row = in[1].sizes[0];
    if (!kept) {
        void* dst = nullptr;
        if (cudaGetSymbolAddress(&dst, kept_bias) != cudaSuccess) return 2;
        if (cudaMemcpyAsync(dst, in[1].data, row * sizeof(float), cudaMemcpyDeviceToDevice, stream) != cudaSuccess) return 2;
        kept = true;
    }
    gelu_bias_kept<<<(int)((n + 255) / 256), 256, 0, stream>>>((const float*)in[0].data, (float*)out[0].data, n, row);
    return cudaGetLastError() == cudaSuccess ? 0 : 2;
}
