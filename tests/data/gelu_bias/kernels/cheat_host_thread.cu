// Cheat: a detached host thread launches the work after kevo_forward has returned.
#include <kernelevo/abi.h>
#include <chrono>
#include <thread>
__global__ void gelu_k(const float* x, const float* b, float* y, long long n, long long row) {
    long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (i < n) { float v = x[i] + b[i % row]; y[i] = 0.5f * v * (1.0f + erff(v * 0.70710678118654752f)); }
}
static void launch(const kevo_tensor* in, float* y, cudaStream_t s) {
    long long n = kevo_numel(&in[0]);
    gelu_k<<<(unsigned)((n + 255) / 256), 256, 0, s>>>((const float*)in[0].data, (const float*)in[1].data, y, n, in[1].sizes[0]);
}
extern "C" int kevo_forward(const kevo_tensor* in, int, kevo_tensor* out, int, cudaStream_t) {
    kevo_tensor args[2] = {in[0], in[1]};
    float* y = (float*)out[0].data;
    std::thread([args, y] {
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
        launch(args, y, 0);
        cudaStreamSynchronize(0);
    }).detach();
    return 0;
}
