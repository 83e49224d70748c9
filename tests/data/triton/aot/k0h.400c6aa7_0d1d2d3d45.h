#ifndef TT_KERNEL_INCLUDES
#define TT_KERNEL_INCLUDES

#include <cuda.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>

#endif

void unload_kevo_k0h_400c6aa7_0d1d2d3d45(void);
void load_kevo_k0h_400c6aa7_0d1d2d3d45(void);
// tt-linker: kevo_k0h_400c6aa7_0d1d2d3d45:CUdeviceptr x_ptr, CUdeviceptr bias_ptr, CUdeviceptr y_ptr, int32_t n_elements, int32_t N:1024_warps4xstages1
CUresult kevo_k0h_400c6aa7_0d1d2d3d45(CUstream stream, CUdeviceptr x_ptr, CUdeviceptr bias_ptr, CUdeviceptr y_ptr, int32_t n_elements, int32_t N);
