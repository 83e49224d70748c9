// Wrong: forgets the bias.
#include <kernelevo/abi.h>
__global__ void k(const float* x, float* y, long long n) {
    long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (i < n) { float v = x[i]; y[i] = 0.5f * v * (1.0f + erff(v * 0.70710678f)); }
}
extern "C" int kevo_forward(const kevo_tensor* in, int, kevo_tensor* out, int, cudaStream_t s) {
    long long n = kevo_numel(&in[0]);
    k<<<(unsigned)((n + 255) / 256), 256, 0, s>>>((const float*)in[0].data, (float*)out[0].data, n);
    return 0;
}
