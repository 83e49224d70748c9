/* clang-format off */
#include <stdio.h>
#include <stdint.h>
#include <inttypes.h>
#include <string.h>
#include <cuda.h>


// helpers to check for cuda errors
#define CUDA_CHECK(ans) {\
    gpuAssert((ans), __FILE__, __LINE__);\
  }\

static inline void gpuAssert(CUresult code, const char *file, int line) {
  if (code != CUDA_SUCCESS) {
    const char *prefix = "Triton Error [CUDA]: ";
    const char *str;
    cuGetErrorString(code, &str);
    char err[1024] = {0};
    strcat(err, prefix);
    strcat(err, str);
    printf("%s\n", err);
    exit(code);
  }
}

// globals
#define CUBIN_NAME kevo_k0g_53df88cc_012345_cubin
CUmodule kevo_k0g_53df88cc_012345_mod = NULL;
CUfunction kevo_k0g_53df88cc_012345_func = NULL;
unsigned char CUBIN_NAME[64] = { 0x7f, 0x45, 0x4c, 0x46, 0x72, 0x65, 0x63, 0x6f, 0x72, 0x64, 0x65, 0x64, 0x20, 0x66, 0x69, 0x78, 0x74, 0x75, 0x72, 0x65, 0x3a, 0x20, 0x6e, 0x6f, 0x20, 0x72, 0x65, 0x61, 0x6c, 0x20, 0x63, 0x75, 0x62, 0x69, 0x6e, 0x2e, 0x2e, 0x2e, 0x2e, 0x2e, 0x2e, 0x2e, 0x2e, 0x2e, 0x2e, 0x2e, 0x2e, 0x2e, 0x2e, 0x2e, 0x2e, 0x2e, 0x2e, 0x2e, 0x2e, 0x2e, 0x2e, 0x2e, 0x2e, 0x2e, 0x2e, 0x2e, 0x2e, 0x2e };


void unload_kevo_k0g_53df88cc_012345(void) {
    CUDA_CHECK(cuModuleUnload(kevo_k0g_53df88cc_012345_mod));
}

// TODO: some code duplication with `runtime/backend/cuda.c`
void load_kevo_k0g_53df88cc_012345() {
    int dev = 0;
    void *bin = (void *)&CUBIN_NAME;
    int shared = 0;
    CUDA_CHECK(cuModuleLoadData(&kevo_k0g_53df88cc_012345_mod, bin));
    CUDA_CHECK(cuModuleGetFunction(&kevo_k0g_53df88cc_012345_func, kevo_k0g_53df88cc_012345_mod, "gelu_bias_kernel"));
    // set dynamic shared memory if necessary
    int shared_optin;
    CUDA_CHECK(cuDeviceGetAttribute(&shared_optin, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, dev));
    if (shared > 49152 && shared_optin > 49152) {
      CUDA_CHECK(cuFuncSetCacheConfig(kevo_k0g_53df88cc_012345_func, CU_FUNC_CACHE_PREFER_SHARED));
      CUDA_CHECK(cuFuncSetAttribute(kevo_k0g_53df88cc_012345_func, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, shared_optin))
    }
}

/*
['BLOCK=1024', 'num_warps=4', 'num_stages=1']
*/
CUresult kevo_k0g_53df88cc_012345(CUstream stream, CUdeviceptr x_ptr, CUdeviceptr bias_ptr, CUdeviceptr y_ptr, int32_t n_elements, int32_t N) {
    if (kevo_k0g_53df88cc_012345_func == NULL)
       load_kevo_k0g_53df88cc_012345();
    unsigned int gX = kevo_grid_x;
    unsigned int gY = kevo_grid_y;
    unsigned int gZ = kevo_grid_z;
    CUdeviceptr global_scratch = 0;
    CUdeviceptr profile_scratch = 0;
    void *args[7] = { &x_ptr, &bias_ptr, &y_ptr, &n_elements, &N, &global_scratch, &profile_scratch };
    // TODO: shared memory
    if(gX * gY * gZ > 0)
      return cuLaunchKernel(kevo_k0g_53df88cc_012345_func, gX, gY, gZ, 4 * 32, 1, 1, 0, stream, args, NULL);
    else
      return CUDA_ERROR_INVALID_VALUE;
}
