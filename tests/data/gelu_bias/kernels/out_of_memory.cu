// Grabs device memory until the allocator gives up, then reports the failure.
#include <kernelevo/abi.h>
#include <vector>
extern "C" int kevo_forward(const kevo_tensor*, int, kevo_tensor*, int, cudaStream_t) {
    std::vector<void*> blocks;
    void* p = nullptr;
    while (cudaMalloc(&p, (size_t)1 << 34) == cudaSuccess) blocks.push_back(p);
    return 3;  // out of memory
}
