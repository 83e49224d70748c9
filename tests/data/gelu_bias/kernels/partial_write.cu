// Writes only the first half of the output: the poisoned rest must be caught.
#include <kernelevo/abi.h>
__global__ void k(const float* x, const float* b, float* y, long long n, long long row) {
    long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (i < n / 2) { float v = x[i] + b[i % row]; y[i] = 0.5f * v * (1.0f + erff(v * 0.70710678f)); }
}
extern "C" int kevo_forward(const kevo_tensor* in, int, kevo_tensor* out, int, cudaStream_t s) {
    long long n = kevo_numel(&in[0]);
    k<<<(unsigned)((n + 255) / 256), 256, 0, s>>>((const float*)in[0].data, (const float*)in[1].data, (float*)out[0].data, n, in[1].sizes[0]);
    return 0;
}
