#include <kernelevo/abi.h>
extern "C" int kevo_forward(const kevo_tensor*, int, kevo_tensor*, int, cudaStream_t) { return 7; }
