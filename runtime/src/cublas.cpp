// KernelEvo::cublas: the cuBLAS/cuBLASLt handles and workspace of kernel ABI version 2
// (kernelevo/abi.h) for kernelevo_optimize() libraries whose kernels call them. Linked only by
// those (cmake/KernelEvoDispatch.cmake), so other programs never load cuBLAS.
#include "kernelevo/cublas_host.h"

KEVO_CUBLAS_HOST_DEFINE_ENTRY_POINTS(kevo_cublas::linked_api())
