// Writes through a wild device pointer.
#include <kernelevo/abi.h>
__global__ void k(float* y) { y[threadIdx.x] = 1.0f; }
extern "C" int kevo_forward(const kevo_tensor*, int, kevo_tensor*, int, cudaStream_t s) {
    k<<<1, 32, 0, s>>>((float*)0x10);
    return 0;
}
