// Cheat: computes correctly, but forks a daemon (setsid) that holds stdout open and lives on.
#include <kernelevo/abi.h>
#include <unistd.h>

__global__ void gelu_k(const float* x, const float* b, float* y, long long n, long long row) {
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {
        float v = x[i] + b[i % row];
        y[i] = 0.5f * v * (1.0f + erff(v * 0.70710678118654752f));
    }
}

extern "C" int kevo_forward(const kevo_tensor* in, int, kevo_tensor* out, int, cudaStream_t s) {
    static bool forked = false;
    if (!forked) {
        forked = true;
        if (fork() == 0) {
            setsid();
            sleep(600);
            _exit(0);
        }
    }
    const long long n = kevo_numel(&in[0]);
    gelu_k<<<132 * 16, 256, 0, s>>>((const float*)in[0].data, (const float*)in[1].data, (float*)out[0].data, n, in[1].sizes[0]);
    return cudaGetLastError() == cudaSuccess ? 0 : 2;
}
