// Never finishes.
#include <kernelevo/abi.h>
__global__ void k(volatile int* flag) { while (*flag == 0) {} }
extern "C" int kevo_forward(const kevo_tensor*, int, kevo_tensor* out, int, cudaStream_t s) {
    cudaMemsetAsync(out[0].data, 0, 4, s);
    k<<<1, 1, 0, s>>>((volatile int*)out[0].data);
    return 0;
}
