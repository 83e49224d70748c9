#include <kernelevo/abi.h>
__global__ void k(const float* x, float* y, long long n) {
    long long i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = undefined_function(x[i]);
}
extern "C" int kevo_forward(const kevo_tensor* in, int, kevo_tensor* out, int, cudaStream_t s) { return 0; }
