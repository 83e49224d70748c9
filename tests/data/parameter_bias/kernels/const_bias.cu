// Wrong for a model: reads the bias as the constant its file holds (0.5 everywhere, as a LayerNorm's
// ones or a zero bias are constant at initialisation). Moving the values alone would not change
// them; the judge also perturbs a parameter's values, so this must fail.
#include <kernelevo/abi.h>

__global__ void gelu_half(const float* __restrict__ x, float* __restrict__ y, long long n) {
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {
        float v = x[i] + 0.5f;
        y[i] = 0.5f * v * (1.0f + erff(v * 0.70710678118654752f));
    }
}

extern "C" int kevo_forward(const kevo_tensor* in, int n_in, kevo_tensor* out, int n_out, cudaStream_t stream) {
    if (n_in != 2 || n_out != 1) return 1;
    const long long n = kevo_numel(&in[0]);
    gelu_half<<<(int)((n + 255) / 256), 256, 0, stream>>>((const float*)in[0].data, (float*)out[0].data, n);
    return cudaGetLastError() == cudaSuccess ? 0 : 2;
}
