// gelu_bias.cu
// The kernel-ABI entry point around Triton's ahead-of-time output (C with the cubin embedded).
// Uses the CUDA driver API, opened at run time (no -lcuda). Generated: do not edit.
#include <kernelevo/abi.h>
#include <cuda.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dlfcn.h>
#include <mutex>

namespace {
#define KEVO_STR2_(x) #x
#define KEVO_STR_(x) KEVO_STR2_(x)
#define KEVO_DRIVER_FUNCTIONS(X) X(cuGetErrorString) X(cuModuleLoadData) X(cuModuleGetFunction) X(cuModuleUnload) \
    X(cuDeviceGetAttribute) X(cuFuncSetCacheConfig) X(cuFuncSetAttribute) X(cuLaunchKernel) X(cuCtxGetCurrent) X(cuCtxGetDevice)
struct kevo_driver_table {
#define KEVO_DRIVER_FIELD_(f) decltype(&::f) f##_ = nullptr;
    KEVO_DRIVER_FUNCTIONS(KEVO_DRIVER_FIELD_)
#undef KEVO_DRIVER_FIELD_
};
kevo_driver_table kevo_drv;
// Opens libcuda.so.1 and fills kevo_drv (the caller holds kevo_load_mutex); 0 on success.
int kevo_driver_open() {
    if (kevo_drv.cuLaunchKernel_) return 0;
    void* h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        fprintf(stderr, "kevo_forward (Triton): cannot open the CUDA driver: %s\n", dlerror());
        return 13;
    }
    kevo_driver_table t;
#define KEVO_DRIVER_SYM_(f)                                                                        \
    t.f##_ = (decltype(t.f##_))dlsym(h, KEVO_STR_(f));                                             \
    if (!t.f##_) {                                                                                 \
        fprintf(stderr, "kevo_forward (Triton): the CUDA driver has no %s\n", KEVO_STR_(f));       \
        return 14;                                                                                 \
    }
    KEVO_DRIVER_FUNCTIONS(KEVO_DRIVER_SYM_)
#undef KEVO_DRIVER_SYM_
    kevo_drv = t;
    return 0;
}
#undef cuGetErrorString
#define cuGetErrorString kevo_drv.cuGetErrorString_
#undef cuModuleLoadData
#define cuModuleLoadData kevo_drv.cuModuleLoadData_
#undef cuModuleGetFunction
#define cuModuleGetFunction kevo_drv.cuModuleGetFunction_
#undef cuModuleUnload
#define cuModuleUnload kevo_drv.cuModuleUnload_
#undef cuDeviceGetAttribute
#define cuDeviceGetAttribute kevo_drv.cuDeviceGetAttribute_
#undef cuFuncSetCacheConfig
#define cuFuncSetCacheConfig kevo_drv.cuFuncSetCacheConfig_
#undef cuFuncSetAttribute
#define cuFuncSetAttribute kevo_drv.cuFuncSetAttribute_
#undef cuLaunchKernel
#define cuLaunchKernel kevo_drv.cuLaunchKernel_
#undef cuCtxGetCurrent
#define cuCtxGetCurrent kevo_drv.cuCtxGetCurrent_
#undef cuCtxGetDevice
#define cuCtxGetDevice kevo_drv.cuCtxGetDevice_

// The grid of the next launch on this thread: triton.tools.compile was given
// --grid kevo_grid_x,kevo_grid_y,kevo_grid_z.
thread_local unsigned int kevo_grid_x = 0, kevo_grid_y = 0, kevo_grid_z = 0;

// ---- kevo_aot_0: kevo_k0h_400c6aa7_0d1d2d3d45 (Triton kernel gelu_bias_kernel) ----
namespace kevo_aot_0 {
/* clang-format off */
// (kernelevo: moved to the top) #include <stdio.h>
// (kernelevo: moved to the top) #include <stdint.h>
// (kernelevo: moved to the top) #include <inttypes.h>
// (kernelevo: moved to the top) #include <string.h>
// (kernelevo: moved to the top) #include <cuda.h>


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
#define CUBIN_NAME kevo_k0h_400c6aa7_0d1d2d3d45_cubin
CUmodule kevo_k0h_400c6aa7_0d1d2d3d45_mod = NULL;
CUfunction kevo_k0h_400c6aa7_0d1d2d3d45_func = NULL;
unsigned char CUBIN_NAME[64] = { 0x7f, 0x45, 0x4c, 0x46, 0x72, 0x65, 0x63, 0x6f, 0x72, 0x64, 0x65, 0x64, 0x20, 0x66, 0x69, 0x78, 0x74, 0x75, 0x72, 0x65, 0x3a, 0x20, 0x6e, 0x6f, 0x20, 0x72, 0x65, 0x61, 0x6c, 0x20, 0x63, 0x75, 0x62, 0x69, 0x6e, 0x2e, 0x2e, 0x2e, 0x2e, 0x2e, 0x2e, 0x2e, 0x2e, 0x2e, 0x2e, 0x2e, 0x2e, 0x2e, 0x2e, 0x2e, 0x2e, 0x2e, 0x2e, 0x2e, 0x2e, 0x2e, 0x2e, 0x2e, 0x2e, 0x2e, 0x2e, 0x2e, 0x2e, 0x2e };


void unload_kevo_k0h_400c6aa7_0d1d2d3d45(void) {
    CUDA_CHECK(cuModuleUnload(kevo_k0h_400c6aa7_0d1d2d3d45_mod));
}

// TODO: some code duplication with `runtime/backend/cuda.c`
void load_kevo_k0h_400c6aa7_0d1d2d3d45() {
    int dev = 0;
    void *bin = (void *)&CUBIN_NAME;
    int shared = 0;
    CUDA_CHECK(cuModuleLoadData(&kevo_k0h_400c6aa7_0d1d2d3d45_mod, bin));
    CUDA_CHECK(cuModuleGetFunction(&kevo_k0h_400c6aa7_0d1d2d3d45_func, kevo_k0h_400c6aa7_0d1d2d3d45_mod, "gelu_bias_kernel"));
    // set dynamic shared memory if necessary
    int shared_optin;
    CUDA_CHECK(cuDeviceGetAttribute(&shared_optin, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, dev));
    if (shared > 49152 && shared_optin > 49152) {
      CUDA_CHECK(cuFuncSetCacheConfig(kevo_k0h_400c6aa7_0d1d2d3d45_func, CU_FUNC_CACHE_PREFER_SHARED));
      CUDA_CHECK(cuFuncSetAttribute(kevo_k0h_400c6aa7_0d1d2d3d45_func, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, shared_optin))
    }
}

/*
['BLOCK=1024', 'num_warps=4', 'num_stages=1']
*/
CUresult kevo_k0h_400c6aa7_0d1d2d3d45(CUstream stream, CUdeviceptr x_ptr, CUdeviceptr bias_ptr, CUdeviceptr y_ptr, int32_t n_elements, int32_t N) {
    if (kevo_k0h_400c6aa7_0d1d2d3d45_func == NULL)
       load_kevo_k0h_400c6aa7_0d1d2d3d45();
    unsigned int gX = kevo_grid_x;
    unsigned int gY = kevo_grid_y;
    unsigned int gZ = kevo_grid_z;
    CUdeviceptr global_scratch = 0;
    CUdeviceptr profile_scratch = 0;
    void *args[7] = { &x_ptr, &bias_ptr, &y_ptr, &n_elements, &N, &global_scratch, &profile_scratch };
    // TODO: shared memory
    if(gX * gY * gZ > 0)
      return cuLaunchKernel(kevo_k0h_400c6aa7_0d1d2d3d45_func, gX, gY, gZ, 4 * 32, 1, 1, 0, stream, args, NULL);
    else
      return CUDA_ERROR_INVALID_VALUE;
}

}  // namespace kevo_aot_0
#undef CUBIN_NAME
#undef CUDA_CHECK

// ---- kevo_aot_1: kevo_k0g_53df88cc_012345 (Triton kernel gelu_bias_kernel) ----
namespace kevo_aot_1 {
/* clang-format off */
// (kernelevo: moved to the top) #include <stdio.h>
// (kernelevo: moved to the top) #include <stdint.h>
// (kernelevo: moved to the top) #include <inttypes.h>
// (kernelevo: moved to the top) #include <string.h>
// (kernelevo: moved to the top) #include <cuda.h>


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

}  // namespace kevo_aot_1
#undef CUBIN_NAME
#undef CUDA_CHECK

int64_t kevo_cdiv(int64_t a, int64_t b) { return b == 0 ? 0 : (a + b - 1) / b; }
int64_t kevo_div(int64_t a, int64_t b) { return b == 0 ? 0 : a / b; }
int64_t kevo_mod(int64_t a, int64_t b) { return b == 0 ? 0 : a % b; }
int64_t kevo_min(int64_t a, int64_t b) { return a < b ? a : b; }
int64_t kevo_max(int64_t a, int64_t b) { return a > b ? a : b; }

// Says why on stderr (once per process: the caller falls back on every failing call), returns code.
int kevo_fail(int code, const char* what, CUresult r) {
    static std::once_flag said;
    std::call_once(said, [&] {
        const char* s = nullptr;
        if (r != CUDA_SUCCESS && kevo_drv.cuGetErrorString_) cuGetErrorString(r, &s);
        fprintf(stderr, "kevo_forward (Triton): %s%s%s (returning %d)\n", what, s ? ": " : "", s ? s : "", code);
    });
    return code;
}

bool kevo_contiguous(const kevo_tensor& t) {
    int64_t expected = 1;
    for (int d = t.ndim - 1; d >= 0; --d) {
        if (t.sizes[d] != 1 && t.strides[d] != expected) return false;
        expected *= t.sizes[d];
    }
    return true;
}

// Loads a module into the current context (once per process; the first context wins), without
// the exit() that the AOT load function calls on an error.
CUresult kevo_load(CUmodule* mod, CUfunction* fn, const void* image, const char* name, int shared) {
    CUresult r = cuModuleLoadData(mod, image);
    if (r != CUDA_SUCCESS) return r;
    r = cuModuleGetFunction(fn, *mod, name);
    if (r != CUDA_SUCCESS) return r;
    if (shared > 49152) {
        CUdevice dev;
        r = cuCtxGetDevice(&dev);
        if (r != CUDA_SUCCESS) return r;
        int optin = 0;
        r = cuDeviceGetAttribute(&optin, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, dev);
        if (r != CUDA_SUCCESS) return r;
        if (shared > optin) return CUDA_ERROR_INVALID_VALUE;
        cuFuncSetCacheConfig(*fn, CU_FUNC_CACHE_PREFER_SHARED);
        r = cuFuncSetAttribute(*fn, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, shared);
        if (r != CUDA_SUCCESS) return r;
    }
    return CUDA_SUCCESS;
}

std::mutex kevo_load_mutex;
CUcontext kevo_loaded_context = nullptr;

int kevo_load_all() {
    std::lock_guard<std::mutex> lock(kevo_load_mutex);
    if (int e = kevo_driver_open()) return e;
    CUcontext ctx = nullptr;
    CUresult r = cuCtxGetCurrent(&ctx);
    if (r != CUDA_SUCCESS || ctx == nullptr) return kevo_fail(10, "no current CUDA context on this thread", r);
    if (kevo_loaded_context != nullptr) {
        if (ctx != kevo_loaded_context) return kevo_fail(11, "called from another CUDA context than the one the kernel was loaded in", CUDA_SUCCESS);
        return 0;
    }
    r = kevo_load(&kevo_aot_0::kevo_k0h_400c6aa7_0d1d2d3d45_mod, &kevo_aot_0::kevo_k0h_400c6aa7_0d1d2d3d45_func, kevo_aot_0::kevo_k0h_400c6aa7_0d1d2d3d45_cubin, "gelu_bias_kernel", 0);
    if (r != CUDA_SUCCESS) return kevo_fail(12, "cannot load the Triton kernel gelu_bias_kernel", r);
    r = kevo_load(&kevo_aot_1::kevo_k0g_53df88cc_012345_mod, &kevo_aot_1::kevo_k0g_53df88cc_012345_func, kevo_aot_1::kevo_k0g_53df88cc_012345_cubin, "gelu_bias_kernel", 0);
    if (r != CUDA_SUCCESS) return kevo_fail(12, "cannot load the Triton kernel gelu_bias_kernel", r);
    kevo_loaded_context = ctx;
    return 0;
}
}  // namespace

extern "C" int kevo_forward(const kevo_tensor* in, int n_in, kevo_tensor* out, int n_out, cudaStream_t stream) {
    if (n_in != 2 || n_out != 1) return kevo_fail(1, "wrong number of tensors", CUDA_SUCCESS);
    if (in[0].ndim != 2 || in[0].dtype != 0 || !kevo_contiguous(in[0])) return kevo_fail(2, "x: unexpected rank, dtype or layout", CUDA_SUCCESS);
    const int64_t kevo_dim_M = in[0].sizes[0];
    const int64_t kevo_dim_N = in[0].sizes[1];
    if (in[1].ndim != 1 || in[1].dtype != 0 || !kevo_contiguous(in[1])) return kevo_fail(2, "bias: unexpected rank, dtype or layout", CUDA_SUCCESS);
    if (in[1].sizes[0] != kevo_dim_N) return kevo_fail(3, "bias: size N differs between tensors", CUDA_SUCCESS);
    if (out[0].ndim != 2 || out[0].dtype != 0 || !kevo_contiguous(out[0])) return kevo_fail(2, "y: unexpected rank, dtype or layout", CUDA_SUCCESS);
    if (out[0].sizes[0] != kevo_dim_M) return kevo_fail(3, "y: size M differs between tensors", CUDA_SUCCESS);
    if (out[0].sizes[1] != kevo_dim_N) return kevo_fail(3, "y: size N differs between tensors", CUDA_SUCCESS);
    (void)in; (void)out;
    if (int e = kevo_load_all()) return e;
    CUresult r = CUDA_SUCCESS;
    {  // launch 0: gelu_bias_kernel
        const int64_t kevo_v_n_elements = (kevo_dim_M * kevo_dim_N);
        if (kevo_v_n_elements < INT32_MIN || kevo_v_n_elements > INT32_MAX) return kevo_fail(4, "n_elements does not fit in i32 (give it type i64)", CUDA_SUCCESS);
        const int64_t kevo_v_N = kevo_dim_N;
        if (kevo_v_N < INT32_MIN || kevo_v_N > INT32_MAX) return kevo_fail(4, "N does not fit in i32 (give it type i64)", CUDA_SUCCESS);
        const int64_t kevo_gx = kevo_cdiv((kevo_dim_M * kevo_dim_N), INT64_C(1024));
        const int64_t kevo_gy = INT64_C(1);
        const int64_t kevo_gz = INT64_C(1);
        if (kevo_gx < 0 || kevo_gy < 0 || kevo_gz < 0 || kevo_gx > INT64_C(2147483647) || kevo_gy > 65535 || kevo_gz > 65535)
            return kevo_fail(5, "grid out of range", CUDA_SUCCESS);
        kevo_grid_x = (unsigned int)kevo_gx; kevo_grid_y = (unsigned int)kevo_gy; kevo_grid_z = (unsigned int)kevo_gz;
        if (kevo_gx * kevo_gy * kevo_gz > 0) {
            if (((uintptr_t)in[0].data % 16 == 0) && ((uintptr_t)in[1].data % 16 == 0) && ((uintptr_t)out[0].data % 16 == 0) && (kevo_v_n_elements % 16 == 0)) r = kevo_aot_0::kevo_k0h_400c6aa7_0d1d2d3d45((CUstream)stream, (CUdeviceptr)in[0].data, (CUdeviceptr)in[1].data, (CUdeviceptr)out[0].data, (int32_t)kevo_v_n_elements, (int32_t)kevo_v_N);  // the hinted specialization
            else r = kevo_aot_1::kevo_k0g_53df88cc_012345((CUstream)stream, (CUdeviceptr)in[0].data, (CUdeviceptr)in[1].data, (CUdeviceptr)out[0].data, (int32_t)kevo_v_n_elements, (int32_t)kevo_v_N);
            if (r != CUDA_SUCCESS) return kevo_fail(6, "launching gelu_bias_kernel failed", r);
        }
    }
    return 0;
}
