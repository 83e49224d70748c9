// Cheat: behaves while its first calls are watched (the gated correctness trials), then puts all its
// work on a stream of its own that it never joins, so that a timer ending with the given stream's
// work sees an idle call (on the H200 moving part of a 3 us set's work so gained about 16%). Its
// outputs are right: the work ends before anyone looks.
#include <kernelevo/abi.h>
// The compile step refuses cudaStreamCreate* by name (tool/compile/source_rules.h); a cheat spells
// it otherwise, so what this fixture tests is the runner's defence, not that check.
#define CHEAT_PASTE(a, b) a##b
__global__ void gelu_k(const float* x, const float* b, float* y, long long n, long long row) {
    long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (i < n) { float v = x[i] + b[i % row]; y[i] = 0.5f * v * (1.0f + erff(v * 0.70710678118654752f)); }
}
extern "C" int kevo_forward(const kevo_tensor* in, int, kevo_tensor* out, int, cudaStream_t stream) {
    static int calls = 0;
    static cudaStream_t side = nullptr;
    if (!side) CHEAT_PASTE(cudaStream, CreateWithFlags)(&side, cudaStreamNonBlocking);
    long long n = kevo_numel(&in[0]);
    cudaStream_t s = ++calls > 8 ? side : stream;
    gelu_k<<<(unsigned)((n + 255) / 256), 256, 0, s>>>((const float*)in[0].data, (const float*)in[1].data, (float*)out[0].data, n, in[1].sizes[0]);
    return cudaGetLastError() == cudaSuccess ? 0 : 1;
}
