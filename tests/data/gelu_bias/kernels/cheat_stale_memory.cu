// Cheat: hopes the reference's result still lies in freed device memory and copies it out.
#include <kernelevo/abi.h>
extern "C" int kevo_forward(const kevo_tensor*, int, kevo_tensor* out, int, cudaStream_t s) {
    size_t bytes = kevo_numel(&out[0]) * sizeof(float);
    void* p = nullptr;
    if (cudaMalloc(&p, bytes) != cudaSuccess) return 1;
    cudaMemcpyAsync(out[0].data, p, bytes, cudaMemcpyDeviceToDevice, s);
    cudaStreamSynchronize(s);
    cudaFree(p);
    return 0;
}
