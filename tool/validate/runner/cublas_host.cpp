// The runner's side of kernel ABI version 2 (kernelevo/abi.h): the cuBLAS and cuBLASLt handles and
// the workspace a candidate gets from kevo_cublas_handle() and the like. The candidate process
// makes them in init_gpu (candidate.cu), before the confinement and before the candidate library
// is opened, on its one stream; afterwards nothing more is made and no other stream is served.
// The program exports these entry points (validate/CMakeLists.txt) for the candidate to bind to.
#include "kernelevo/cublas_host.h"

KEVO_CUBLAS_HOST_DEFINE_ENTRY_POINTS(kevo_cublas::Host::instance().api())
