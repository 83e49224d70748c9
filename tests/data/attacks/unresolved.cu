// Compiles, but needs a symbol nothing defines: loading it must fail (a compile_error).
#include <kernelevo/abi.h>
extern "C" int kevo_missing_helper(int);
extern "C" int kevo_forward(const kevo_tensor*, int n_in, kevo_tensor*, int, cudaStream_t) { return kevo_missing_helper(n_in); }
