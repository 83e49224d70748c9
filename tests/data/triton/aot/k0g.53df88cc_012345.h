#ifndef TT_KERNEL_INCLUDES
#define TT_KERNEL_INCLUDES

#include <cuda.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>

#endif

void unload_kevo_k0g_53df88cc_012345(void);
void load_kevo_k0g_53df88cc_012345(void);
// tt-linker: kevo_k0g_53df88cc_012345:CUdeviceptr x_ptr, CUdeviceptr bias_ptr, CUdeviceptr y_ptr, int32_t n_elements, int32_t N:1024_warps4xstages1
CUresult kevo_k0g_53df88cc_012345(CUstream stream, CUdeviceptr x_ptr, CUdeviceptr bias_ptr, CUdeviceptr y_ptr, int32_t n_elements, int32_t N);
