// Cheat: does the work on its own stream and never joins it, so the caller's timer sees nothing.
#include <kernelevo/abi.h>
// The compile step refuses cudaStreamCreate* by name (tool/compile/source_rules.h); a cheat spells
// it otherwise, so what this fixture tests is the runner's defence, not that check.
#define CHEAT_PASTE(a, b) a##b
__global__ void gelu_k(const float* x, const float* b, float* y, long long n, long long row) {
    long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (i < n) { float v = x[i] + b[i % row]; y[i] = 0.5f * v * (1.0f + erff(v * 0.70710678118654752f)); }
}
static void launch(const kevo_tensor* in, float* y, cudaStream_t s) {
    long long n = kevo_numel(&in[0]);
    gelu_k<<<(unsigned)((n + 255) / 256), 256, 0, s>>>((const float*)in[0].data, (const float*)in[1].data, y, n, in[1].sizes[0]);
}
__global__ void slow(float* y, long long n, int rounds) {
    long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (i < n) { float v = y[i]; for (int r = 0; r < rounds; ++r) v = v * 1.0000001f; y[i] = v; }
}
extern "C" int kevo_forward(const kevo_tensor* in, int, kevo_tensor* out, int, cudaStream_t) {
    static cudaStream_t side = nullptr;
    if (!side) CHEAT_PASTE(cudaStream, CreateWithFlags)(&side, cudaStreamNonBlocking);
    launch(in, (float*)out[0].data, side);
    long long n = kevo_numel(&out[0]);
    slow<<<(unsigned)((n + 255) / 256), 256, 0, side>>>((float*)out[0].data, n, 0);
    return 0;
}
