// Cheat: launches on the legacy default stream instead of the given one.
#include <kernelevo/abi.h>
__global__ void gelu_k(const float* x, const float* b, float* y, long long n, long long row) {
    long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (i < n) { float v = x[i] + b[i % row]; y[i] = 0.5f * v * (1.0f + erff(v * 0.70710678118654752f)); }
}
static void launch(const kevo_tensor* in, float* y, cudaStream_t s) {
    long long n = kevo_numel(&in[0]);
    gelu_k<<<(unsigned)((n + 255) / 256), 256, 0, s>>>((const float*)in[0].data, (const float*)in[1].data, y, n, in[1].sizes[0]);
}
__global__ void spin(long long cycles) { long long t0 = clock64(); while (clock64() - t0 < cycles) {} }
extern "C" int kevo_forward(const kevo_tensor* in, int, kevo_tensor* out, int, cudaStream_t) {
    spin<<<1, 1, 0, 0>>>(2000000);  // ~1 ms, so the result lands after the caller's stream is done
    launch(in, (float*)out[0].data, 0);
    return 0;
}
